#include "model/decoder_fused.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention_kernels.h"
#include "kernels/gru_kernels.h"
#include "model/dropout.h"

namespace nmt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Every operation of a step, products included, works on each batch row separately, so the
// loops run as independent slices of the batch, one per thread, with no synchronisation between
// steps. Inside at::parallel_for, LibTorch's operators and OpenBLAS (its OpenMP build) run
// single-threaded: each thread's products have about 30 rows here, and one core runs them at
// close to its full rate, where splitting each small product between two cores did not (the
// benchmark's second row). The weight gradients after the loop are large products on all threads.
constexpr int64_t kMinimumSlice = 8;  // rows

template <typename SliceFunction>
void for_each_slice(int64_t rows, const SliceFunction& slice_function) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  at::parallel_for(0, rows, std::max(kMinimumSlice, (rows + threads - 1) / threads), [&](int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;  // grad mode is per thread: none in the workers either
    slice_function(begin, end);
  });
}

// Softmax of scores [S] over the positions where mask is true, in place; exactly 0 elsewhere.
// Every row has a real position (the source EOS).
void masked_softmax_row(float* scores, const bool* mask, int64_t positions) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < positions; ++s) {
    if (mask[s] && scores[s] > max) max = scores[s];
  }
  float sum = 0;
  for (int64_t s = 0; s < positions; ++s) {
    scores[s] = mask[s] ? std::exp(scores[s] - max) : 0.0f;
    sum += scores[s];
  }
  for (int64_t s = 0; s < positions; ++s) scores[s] /= sum;
}

// The softmax's backward in place: grad <- w * (grad - sum_s w_s grad_s).
void softmax_row_backward(const float* weights, float* grad, int64_t positions) {
  float dot = 0;
  for (int64_t s = 0; s < positions; ++s) dot += weights[s] * grad[s];
  for (int64_t s = 0; s < positions; ++s) grad[s] = weights[s] * (grad[s] - dot);
}

float* row(const torch::Tensor& tensor, int64_t t, int64_t b) {  // &tensor[t][b][0] of a [T, B, ...] tensor
  return tensor.data_ptr<float>() + t * tensor.stride(0) + b * tensor.stride(1);
}

// The function's inputs (all contiguous).
struct LoopInputs {
  torch::Tensor gates;                                              // [T, B, 3H]
  torch::Tensor initial_hidden;                                     // [B, H]
  torch::Tensor states, keys;                                       // [B, S, C], [B, S, A]
  torch::Tensor mask;                                               // [B, S] bool
  torch::Tensor feed, hidden, hidden_bias, query, energy, combine;  // as FusedDecoderWeights
};

// The forward's weights transposed and stored so ([in, out], contiguous): OpenBLAS runs
// x [30, 256] by a stored [256, 768] at 112 GFLOP/s on one core here, by the transpose of a
// stored [768, 256] at 84.
struct TransposedWeights {
  explicit TransposedWeights(const LoopInputs& in)
      : feed(in.feed.t().contiguous()),
        hidden(in.hidden.t().contiguous()),
        query(in.query.t().contiguous()),
        combine(in.combine.t().contiguous()) {}
  torch::Tensor feed, hidden, query, combine;
};

// What the forward loop writes: the outputs and what the backward needs.
struct LoopRecord {
  torch::Tensor attentional;  // [T, B, H] output a_t
  torch::Tensor attention;    // [T, B, S] output w_t
  torch::Tensor joined;       // [T, B, H + C] [h_t; c_t], the combine layer's input; h_t read in place
  torch::Tensor gru_saved;    // [T, B, 4H] the GRU kernel's (r, z, n, gh_n)
  torch::Tensor activations;  // [T, B, S, A] tanh(K + W_q h_t)
  torch::Tensor combined;     // [T, B, H] tanh(W_c [h_t; c_t]) before dropout
  torch::Tensor masks;        // [T, B, H] dropout masks; undefined without dropout
};

// The rows [begin, end) of the batch, as [n, ...] views of a [T, B, ...] tensor at step t or a
// [B, ...] tensor.
torch::Tensor slice(const torch::Tensor& tensor, int64_t t, int64_t begin, int64_t end) {
  return tensor[t].narrow(0, begin, end - begin);
}
torch::Tensor slice(const torch::Tensor& tensor, int64_t begin, int64_t end) {
  return tensor.narrow(0, begin, end - begin);
}

// The forward loop over every position for the batch rows [begin, end).
void forward_slice(const LoopInputs& in, const TransposedWeights& transposed, const LoopRecord& out, int64_t begin,
                   int64_t end) {
  const int64_t steps = in.gates.size(0), rows = end - begin, size = in.initial_hidden.size(1);
  const int64_t positions = in.keys.size(1), key_size = in.keys.size(2), state_size = in.states.size(2);
  const auto options = in.gates.options();
  torch::Tensor input_gates = torch::empty({rows, 3 * size}, options);
  torch::Tensor hidden_gates = torch::empty({rows, 3 * size}, options);
  torch::Tensor projected_query = torch::empty({rows, key_size}, options);
  torch::Tensor pre_activation = torch::empty({rows, size}, options);
  const bool* source_mask = in.mask.data_ptr<bool>();
  for (int64_t t = 0; t < steps; ++t) {
    // h_{t-1}: the initial state, or the first H columns of the previous joined rows.
    const torch::Tensor previous =
        t == 0 ? slice(in.initial_hidden, begin, end) : slice(out.joined, t - 1, begin, end).narrow(1, 0, size);
    const torch::Tensor gi = t == 0 ? slice(in.gates, 0, begin, end)
                                    : at::addmm_out(input_gates, slice(in.gates, t, begin, end),
                                                    slice(out.attentional, t - 1, begin, end), transposed.feed);
    at::addmm_out(hidden_gates, in.hidden_bias, previous, transposed.hidden);
    for (int64_t i = 0; i < rows; ++i) {
      kernels::gru_step(gi.data_ptr<float>() + i * gi.stride(0), hidden_gates.data_ptr<float>() + i * 3 * size,
                        previous.data_ptr<float>() + i * previous.stride(0), 1, size, row(out.joined, t, begin + i),
                        row(out.gru_saved, t, begin + i));
    }
    at::mm_out(projected_query, slice(out.joined, t, begin, end).narrow(1, 0, size), transposed.query);
    for (int64_t b = begin; b < end; ++b) {
      float* weights = row(out.attention, t, b);
      kernels::additive_energy(in.keys.data_ptr<float>() + b * positions * key_size,
                               projected_query.data_ptr<float>() + (b - begin) * key_size, in.energy.data_ptr<float>(),
                               1, positions, key_size, weights, row(out.activations, t, b));
      masked_softmax_row(weights, source_mask + b * positions, positions);
      kernels::weighted_sum(weights, in.states.data_ptr<float>() + b * positions * state_size, 1, positions, state_size,
                            row(out.joined, t, b) + size);
    }
    at::mm_out(pre_activation, slice(out.joined, t, begin, end), transposed.combine);
    kernels::attentional_vector(pre_activation.data_ptr<float>(),
                                out.masks.defined() ? row(out.masks, t, begin) : nullptr, rows * size,
                                row(out.combined, t, begin), row(out.attentional, t, begin));
  }
}

// What the backward loop writes: per-position gradients (for the weight gradients after the
// loop) and the gradients of the inputs that are not weights.
struct LoopGradients {
  torch::Tensor gates;           // [T, B, 3H] dL/dgi_t = dL/dG_t
  torch::Tensor hidden_gates;    // [T, B, 3H] dL/d(W_h h_{t-1} + b_h)
  torch::Tensor query;           // [T, B, A] dL/d(W_q h_t)
  torch::Tensor scores;          // [T, B, S] dL/d energies
  torch::Tensor pre_activation;  // [T, B, H] dL/d(W_c [h_t; c_t])
  torch::Tensor states, keys;    // [B, S, C], [B, S, A], summed over positions
  torch::Tensor initial_hidden;  // [B, H]
};

// The backward loop over every position, last to first, for the batch rows [begin, end), from
// dL/da_t [T, B, H] and dL/dw_t [T, B, S] (or undefined).
void backward_slice(const LoopInputs& in, const LoopRecord& record, const torch::Tensor& grad_attentional,
                    const torch::Tensor& grad_attention, const LoopGradients& grads, int64_t begin, int64_t end) {
  const int64_t steps = in.gates.size(0), rows = end - begin, size = in.initial_hidden.size(1);
  const int64_t positions = in.keys.size(1), key_size = in.keys.size(2), state_size = in.states.size(2);
  const auto options = in.gates.options();
  // Carried from position t + 1 to t: dL/da_t and dL/dh_t.
  torch::Tensor carry_attentional = slice(grad_attentional, steps - 1, begin, end).clone();
  torch::Tensor carry_hidden = slice(grads.initial_hidden, begin, end);  // ends as dL/dh_0
  carry_hidden.zero_();
  torch::Tensor grad_joined = torch::empty({rows, size + state_size}, options);
  torch::Tensor grad_hidden_direct = torch::empty({rows, size}, options);
  for (int64_t t = steps - 1; t >= 0; --t) {
    kernels::attentional_vector_backward(carry_attentional.data_ptr<float>(), row(record.combined, t, begin),
                                         record.masks.defined() ? row(record.masks, t, begin) : nullptr, rows * size,
                                         row(grads.pre_activation, t, begin));
    at::mm_out(grad_joined, slice(grads.pre_activation, t, begin, end), in.combine);  // [dL/dh_t; dL/dc_t] via a_t
    for (int64_t b = begin; b < end; ++b) {
      const float* weights = row(record.attention, t, b);
      float* grad = row(grads.scores, t, b);
      kernels::weighted_sum_backward(weights, in.states.data_ptr<float>() + b * positions * state_size,
                                     grad_joined.data_ptr<float>() + (b - begin) * (size + state_size) + size, 1,
                                     positions, state_size, grad,
                                     grads.states.data_ptr<float>() + b * positions * state_size,
                                     /*accumulate_states=*/true);
      if (grad_attention.defined()) {
        const float* extra = row(grad_attention, t, b);
        for (int64_t s = 0; s < positions; ++s) grad[s] += extra[s];
      }
      softmax_row_backward(weights, grad, positions);  // 0 at padded positions, whose weight is 0
      kernels::additive_energy_backward(row(record.activations, t, b), in.energy.data_ptr<float>(), grad, 1, positions,
                                        key_size, grads.keys.data_ptr<float>() + b * positions * key_size,
                                        row(grads.query, t, b), /*accumulate_keys=*/true);
    }
    // dL/dh_t: from position t + 1 (carried), from the combine layer and from the query.
    carry_hidden.add_(grad_joined.narrow(1, 0, size));
    carry_hidden.addmm_(slice(grads.query, t, begin, end), in.query);
    const torch::Tensor previous =
        t == 0 ? slice(in.initial_hidden, begin, end) : slice(record.joined, t - 1, begin, end).narrow(1, 0, size);
    for (int64_t i = 0; i < rows; ++i) {
      kernels::gru_step_backward(carry_hidden.data_ptr<float>() + i * size, row(record.gru_saved, t, begin + i),
                                 previous.data_ptr<float>() + i * previous.stride(0), 1, size,
                                 row(grads.gates, t, begin + i), row(grads.hidden_gates, t, begin + i),
                                 grad_hidden_direct.data_ptr<float>() + i * size);
    }
    at::addmm_out(carry_hidden, grad_hidden_direct, slice(grads.hidden_gates, t, begin, end), in.hidden);
    if (t > 0) {  // dL/da_{t-1}: from the loss, and from input feeding into position t
      at::addmm_out(carry_attentional, slice(grad_attentional, t - 1, begin, end), slice(grads.gates, t, begin, end),
                    in.feed);
    }
  }
}

struct DecoderLoop : public torch::autograd::Function<DecoderLoop> {
  // gates [T, B, 3H] contiguous; returns a_t [T, B, H] and w_t [T, B, S].
  static tensor_list forward(AutogradContext* context, const torch::Tensor& gates, const torch::Tensor& initial_hidden,
                             const torch::Tensor& states, const torch::Tensor& keys, const torch::Tensor& mask,
                             const torch::Tensor& feed, const torch::Tensor& hidden, const torch::Tensor& hidden_bias,
                             const torch::Tensor& query, const torch::Tensor& energy, const torch::Tensor& combine,
                             double dropout) {
    const LoopInputs in{gates, initial_hidden, states, keys, mask, feed, hidden, hidden_bias, query, energy, combine};
    const int64_t steps = gates.size(0), batch = gates.size(1), size = initial_hidden.size(1);
    const int64_t positions = keys.size(1), key_size = keys.size(2), state_size = states.size(2);
    const auto options = gates.options();
    LoopRecord record;
    record.attentional = torch::empty({steps, batch, size}, options);
    record.attention = torch::empty({steps, batch, positions}, options);
    record.joined = torch::empty({steps, batch, size + state_size}, options);
    record.gru_saved = torch::empty({steps, batch, 4 * size}, options);
    record.activations = torch::empty({steps, batch, positions, key_size}, options);
    record.combined = torch::empty({steps, batch, size}, options);
    if (dropout > 0) {
      // Drawn before the loop, one [B, H] mask per position in order, as the per-step path draws
      // them one per step (nothing else in a step draws).
      record.masks = torch::empty({steps, batch, size}, options);
      for (int64_t t = 0; t < steps; ++t) record.masks[t].copy_(dropout_mask({batch, size}, dropout, options));
    }
    const TransposedWeights transposed(in);
    for_each_slice(batch, [&](int64_t begin, int64_t end) { forward_slice(in, transposed, record, begin, end); });

    context->save_for_backward({gates, initial_hidden, states, keys, mask, feed, hidden, hidden_bias, query, energy,
                                combine, record.attentional, record.attention});
    context->saved_data["joined"] = record.joined;
    context->saved_data["gru_saved"] = record.gru_saved;
    context->saved_data["activations"] = record.activations;
    context->saved_data["combined"] = record.combined;
    if (record.masks.defined()) context->saved_data["masks"] = record.masks;
    return {record.attentional, record.attention};
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    TORCH_CHECK(!torch::GradMode::is_enabled(), "fused decoder loop: no second derivatives (create_graph)");
    const auto saved = context->get_saved_variables();
    const LoopInputs in{saved[0], saved[1], saved[2], saved[3], saved[4], saved[5],
                        saved[6], saved[7], saved[8], saved[9], saved[10]};
    LoopRecord record;
    record.attentional = saved[11];
    record.attention = saved[12];
    record.joined = context->saved_data["joined"].toTensor();
    record.gru_saved = context->saved_data["gru_saved"].toTensor();
    record.activations = context->saved_data["activations"].toTensor();
    record.combined = context->saved_data["combined"].toTensor();
    if (context->saved_data.count("masks") != 0) record.masks = context->saved_data["masks"].toTensor();

    const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.initial_hidden.size(1);
    const auto options = in.gates.options();
    const torch::Tensor grad_attentional =
        gradients[0].defined() ? gradients[0].contiguous() : torch::zeros_like(record.attentional);
    const torch::Tensor grad_attention = gradients[1].defined() ? gradients[1].contiguous() : torch::Tensor();
    LoopGradients grads;
    grads.gates = torch::empty({steps, batch, 3 * size}, options);
    grads.hidden_gates = torch::empty({steps, batch, 3 * size}, options);
    grads.query = torch::empty({steps, batch, in.keys.size(2)}, options);
    grads.scores = torch::empty({steps, batch, in.keys.size(1)}, options);
    grads.pre_activation = torch::empty({steps, batch, size}, options);
    grads.states = torch::zeros_like(in.states);
    grads.keys = torch::zeros_like(in.keys);
    grads.initial_hidden = torch::empty_like(in.initial_hidden);
    for_each_slice(batch, [&](int64_t begin, int64_t end) {
      backward_slice(in, record, grad_attentional, grad_attention, grads, begin, end);
    });

    // Weight gradients: one product each over all positions.
    const auto rows = [](const torch::Tensor& tensor) { return tensor.flatten(0, 1); };  // [T, B, n] -> [T * B, n]
    const torch::Tensor hidden_states = record.joined.narrow(2, 0, size);                // h_1 .. h_T
    torch::Tensor grad_combine = rows(grads.pre_activation).t().mm(rows(record.joined));
    torch::Tensor grad_query = rows(grads.query).t().mm(rows(hidden_states));
    torch::Tensor grad_energy = record.activations.view({-1, in.keys.size(2)}).t().mv(grads.scores.view(-1));
    torch::Tensor grad_hidden = grads.hidden_gates[0].t().mm(in.initial_hidden);  // h_0 feeds position 0
    torch::Tensor grad_feed = torch::zeros_like(in.feed);                         // a_0 = 0 feeds nothing
    if (steps > 1) {
      grad_hidden.addmm_(rows(grads.hidden_gates.narrow(0, 1, steps - 1)).t(),
                         rows(hidden_states.narrow(0, 0, steps - 1)));
      grad_feed.addmm_(rows(grads.gates.narrow(0, 1, steps - 1)).t(), rows(record.attentional.narrow(0, 0, steps - 1)));
    }
    torch::Tensor grad_hidden_bias = rows(grads.hidden_gates).sum(0);
    return {grads.gates, grads.initial_hidden, grads.states, grads.keys,  torch::Tensor(), grad_feed,
            grad_hidden, grad_hidden_bias,     grad_query,   grad_energy, grad_combine,    torch::Tensor()};
  }
};

}  // namespace

FusedDecoderOutput fused_decoder_loop(const torch::Tensor& token_gates, const torch::Tensor& initial_hidden,
                                      const EncodedSource& source, const FusedDecoderWeights& weights, double dropout) {
  const int64_t size = initial_hidden.size(1);
  TORCH_CHECK(token_gates.dim() == 3 && token_gates.size(0) == initial_hidden.size(0) &&
                  token_gates.size(2) == 3 * size && token_gates.size(1) > 0,
              "fused decoder loop: token_gates [B, T, 3H] (T > 0) and initial_hidden [B, H] expected");
  TORCH_CHECK(source.states.dim() == 3 && source.keys.dim() == 3 && source.states.size(0) == initial_hidden.size(0) &&
                  source.keys.size(1) == source.states.size(1) && weights.query.size(0) == source.keys.size(2) &&
                  weights.combine.size(1) == size + source.states.size(2),
              "fused decoder loop: encoder states [B, S, C] and keys [B, S, A] that fit the weights expected");
  tensor_list outputs = DecoderLoop::apply(
      token_gates.transpose(0, 1).contiguous(), initial_hidden.contiguous(), source.states.contiguous(),
      source.keys.contiguous(), source.mask.contiguous(), weights.feed.contiguous(), weights.hidden.contiguous(),
      weights.hidden_bias.contiguous(), weights.query.contiguous(), weights.energy.contiguous(),
      weights.combine.contiguous(), dropout);
  return {outputs[0].transpose(0, 1), outputs[1].transpose(0, 1)};
}

}  // namespace nmt
