// Compiled with -mavx2 -mfma (CMakeLists.txt), so nothing here may run before
// avx2_kernels_available() has said yes.
#include "kernels/attention_kernels.h"

#include <stdexcept>

#if NMT_AVX2_KERNELS
#include "kernels/vector_math.h"
#endif

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

using namespace vec;

void additive_energy(const float* keys, const float* query, const float* v, int64_t batch, int64_t positions,
                     int64_t size, int64_t heads, const bool* mask, float* scores, float* activations) {
  const int64_t slice = size / heads;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < positions; ++s) {
      const int64_t row = b * positions + s;
      if (mask != nullptr && !mask[row]) {
        fill_zero(scores + row * heads, heads);
        continue;
      }
      for (int64_t head = 0; head < heads; ++head) {
        const int64_t offset = head * slice;
        const float* q = query + b * size + offset;
        const float* k = keys + row * size + offset;
        const float* w = v + offset;
        float* t = activations != nullptr ? activations + row * size + offset : nullptr;
        Floats sum8 = splat(0.0f);
        int64_t a = 0;
        for (; a + kLanes <= slice; a += kLanes) {
          const Floats value = vec::tanh(load(k + a) + load(q + a));
          if (t != nullptr) store(t + a, value);
          sum8 += value * load(w + a);
        }
        float sum = lane_sum(sum8);
        for (; a < slice; ++a) {
          const float value = ::tanhf(k[a] + q[a]);
          if (t != nullptr) t[a] = value;
          sum += value * w[a];
        }
        scores[row * heads + head] = sum;
      }
    }
  }
}

void additive_energy_backward(const float* activations, const float* v, const float* grad_scores, int64_t batch,
                              int64_t positions, int64_t size, int64_t heads, float* grad_keys, float* grad_query,
                              bool accumulate_keys) {
  const int64_t slice = size / heads;
  for (int64_t b = 0; b < batch; ++b) {
    fill_zero(grad_query + b * size, size);
    for (int64_t s = 0; s < positions; ++s) {
      const int64_t row = b * positions + s;
      for (int64_t head = 0; head < heads; ++head) {
        const int64_t offset = head * slice;
        const float* t = activations + row * size + offset;
        const float* w = v + offset;
        float* dk = grad_keys + row * size + offset;
        float* dq = grad_query + b * size + offset;
        const float g = grad_scores[row * heads + head];
        const Floats g8 = splat(g);
        int64_t a = 0;
        for (; a + kLanes <= slice; a += kLanes) {
          const Floats value = load(t + a);
          const Floats d = g8 * load(w + a) * (1.0f - value * value);
          store(dk + a, accumulate_keys ? load(dk + a) + d : d);
          store(dq + a, load(dq + a) + d);
        }
        for (; a < slice; ++a) {
          const float d = g * w[a] * (1.0f - t[a] * t[a]);
          dk[a] = accumulate_keys ? dk[a] + d : d;
          dq[a] += d;
        }
      }
    }
  }
}

void weighted_sum(const float* weights, const float* states, int64_t batch, int64_t positions, int64_t size,
                  float* context) {
  for (int64_t b = 0; b < batch; ++b) {
    float* out = context + b * size;
    fill_zero(out, size);
    for (int64_t s = 0; s < positions; ++s) {
      const int64_t row = b * positions + s;
      const float w = weights[row];
      if (w == 0.0f) continue;  // padding (and weights that underflowed): nothing to add
      const float* h = states + row * size;
      const Floats w8 = splat(w);
      int64_t c = 0;
      for (; c + kLanes <= size; c += kLanes) store(out + c, load(out + c) + w8 * load(h + c));
      for (; c < size; ++c) out[c] += w * h[c];
    }
  }
}

void weighted_sum_backward(const float* weights, const float* states, const float* grad_context, int64_t batch,
                           int64_t positions, int64_t size, float* grad_weights, float* grad_states,
                           bool accumulate_states) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* g = grad_context + b * size;
    for (int64_t s = 0; s < positions; ++s) {
      const int64_t row = b * positions + s;
      const float* h = states + row * size;
      float* dh = grad_states + row * size;
      const Floats w8 = splat(weights[row]);
      Floats dot8 = splat(0.0f);
      int64_t c = 0;
      for (; c + kLanes <= size; c += kLanes) {
        const Floats g8 = load(g + c);
        dot8 += g8 * load(h + c);
        store(dh + c, accumulate_states ? load(dh + c) + w8 * g8 : w8 * g8);
      }
      float dot = lane_sum(dot8);
      for (; c < size; ++c) {
        dot += g[c] * h[c];
        dh[c] = accumulate_states ? dh[c] + weights[row] * g[c] : weights[row] * g[c];
      }
      grad_weights[row] = dot;
    }
  }
}

void attentional_vector(const float* u, const float* mask, int64_t count, float* activations, float* attentional) {
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    const Floats t = vec::tanh(load(u + i));
    store(activations + i, t);
    store(attentional + i, mask != nullptr ? t * load(mask + i) : t);
  }
  for (; i < count; ++i) {
    activations[i] = ::tanhf(u[i]);
    attentional[i] = mask != nullptr ? activations[i] * mask[i] : activations[i];
  }
}

void attentional_vector_backward(const float* grad_attentional, const float* activations, const float* mask,
                                 int64_t count, float* grad_u) {
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    const Floats t = load(activations + i);
    const Floats g = mask != nullptr ? load(grad_attentional + i) * load(mask + i) : load(grad_attentional + i);
    store(grad_u + i, g * (1.0f - t * t));
  }
  for (; i < count; ++i) {
    const float g = mask != nullptr ? grad_attentional[i] * mask[i] : grad_attentional[i];
    grad_u[i] = g * (1.0f - activations[i] * activations[i]);
  }
}

#else  // not x86-64: avx2_kernels_available() says no, and these are never called

void additive_energy(const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, const bool*, float*,
                     float*) {
  throw std::logic_error("additive_energy: not built");
}
void additive_energy_backward(const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, float*,
                              float*, bool) {
  throw std::logic_error("additive_energy_backward: not built");
}
void weighted_sum(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  throw std::logic_error("weighted_sum: not built");
}
void weighted_sum_backward(const float*, const float*, const float*, int64_t, int64_t, int64_t, float*, float*, bool) {
  throw std::logic_error("weighted_sum_backward: not built");
}
void attentional_vector(const float*, const float*, int64_t, float*, float*) {
  throw std::logic_error("attentional_vector: not built");
}
void attentional_vector_backward(const float*, const float*, const float*, int64_t, float*) {
  throw std::logic_error("attentional_vector_backward: not built");
}

#endif  // NMT_AVX2_KERNELS

}  // namespace nmt::kernels
