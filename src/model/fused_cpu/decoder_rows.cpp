// The per-row arithmetic of the fused decoder loop's additive attention (fused_cpu/decoder_rows.h).
#include "model/fused_cpu/decoder_rows.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/row_kernels.h"

namespace nmt::fused_decoder {

int64_t real_positions(const bool* mask, int64_t positions) {
  int64_t length = 0;
  while (length < positions && mask[length]) ++length;
  for (int64_t s = length; s < positions; ++s) {
    if (mask[s]) throw std::logic_error("fused decoder loop: a source mask row is not a prefix (make_source_mask)");
  }
  if (length == 0) throw std::logic_error("fused decoder loop: a source mask row has no real position");
  return length;
}

void softmax_row_backward(const float* weights, float* grad, int64_t positions) {
  float dot = 0;
  for (int64_t s = 0; s < positions; ++s) dot += weights[s] * grad[s];
  for (int64_t s = 0; s < positions; ++s) grad[s] = weights[s] * (grad[s] - dot);
}

void heads_forward(const float* scores, int64_t length, int64_t positions, int64_t heads, const float* states,
                   int64_t state_size, float* head_weights, float* context, float* mean_weights) {
  const int64_t slice = state_size / heads;
  std::fill(context, context + state_size, 0.0f);
  std::fill(mean_weights, mean_weights + positions, 0.0f);
  for (int64_t n = 0; n < heads; ++n) {
    float* weights = head_weights + n * positions;
    for (int64_t s = 0; s < positions; ++s) weights[s] = scores[s * heads + n];
    kernels::prefix_softmax(weights, length, positions);
    float* head_context = context + n * slice;
    for (int64_t s = 0; s < length; ++s) {
      const float* head_states = states + s * state_size + n * slice;
      for (int64_t i = 0; i < slice; ++i) head_context[i] += weights[s] * head_states[i];
      mean_weights[s] += weights[s] / static_cast<float>(heads);
    }
  }
}

void heads_backward(const float* head_weights, const float* states, const float* grad_context,
                    const float* grad_mean_weights, int64_t positions, int64_t heads, int64_t state_size,
                    float* grad_weights, float* grad_scores, float* grad_states) {
  const int64_t slice = state_size / heads;
  for (int64_t n = 0; n < heads; ++n) {
    const float* weights = head_weights + n * positions;
    const float* head_grad = grad_context + n * slice;
    for (int64_t s = 0; s < positions; ++s) {
      const float* head_states = states + s * state_size + n * slice;
      float* head_grad_states = grad_states + s * state_size + n * slice;
      float dot = 0;
      for (int64_t i = 0; i < slice; ++i) {
        dot += head_grad[i] * head_states[i];
        head_grad_states[i] += weights[s] * head_grad[i];
      }
      grad_weights[s] = dot + (grad_mean_weights != nullptr ? grad_mean_weights[s] / static_cast<float>(heads) : 0.0f);
    }
    softmax_row_backward(weights, grad_weights, positions);
    for (int64_t s = 0; s < positions; ++s) grad_scores[s * heads + n] = grad_weights[s];
  }
}

void cover_keys(const float* keys, const float* coverage, const float* u, int64_t positions, int64_t key_size,
                float* covered) {
  for (int64_t s = 0; s < positions; ++s) {
    for (int64_t a = 0; a < key_size; ++a) covered[s * key_size + a] = keys[s * key_size + a] + coverage[s] * u[a];
  }
}

void advance_coverage(const float* coverage, const float* weights, int64_t positions, float* next) {
  for (int64_t s = 0; s < positions; ++s) next[s] = coverage[s] + weights[s];
}

void add_row(const float* from, int64_t count, float* to) {
  for (int64_t i = 0; i < count; ++i) to[i] += from[i];
}

void cover_keys_backward(const float* grad_covered, const float* coverage, const float* u, int64_t positions,
                         int64_t key_size, float* grad_keys, float* grad_u, float* carry) {
  for (int64_t s = 0; s < positions; ++s) {
    const float* g = grad_covered + s * key_size;
    float dot = 0;
    for (int64_t a = 0; a < key_size; ++a) {
      grad_keys[s * key_size + a] += g[a];
      grad_u[a] += coverage[s] * g[a];
      dot += g[a] * u[a];
    }
    carry[s] += dot;
  }
}

}  // namespace nmt::fused_decoder
