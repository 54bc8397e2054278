// The fused decoder loop's backward pass (fused_cpu/decoder_backward.h): each thread's part of the
// loop over the positions, last to first, one member function per phase of a position; then the
// weights' gradients, each one product over all positions (as LoopLinear does for the per-step
// path).
#include "model/fused_cpu/decoder_backward.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/gru_kernels.h"
#include "model/fused_cpu/decoder_rows.h"
#include "model/linear/bf16_products.h"

namespace nmt::fused_decoder {
namespace {

// Per-step scratch of the backward loop, and the carries from position t + 1 to t.
struct BackwardScratch {
  BackwardScratch(int64_t batch, int64_t size, int64_t state_size, const torch::TensorOptions& options)
      : carry_attentional(torch::empty({batch, size}, options)),
        grad_joined(torch::empty({batch, size + state_size}, options)),
        grad_hidden_direct(torch::empty({batch, size}, options)),
        grad_input(torch::empty({batch, size}, options)) {}
  torch::Tensor carry_attentional;   // [B, H] dL/da_t, from the loss and from position t + 1
  torch::Tensor grad_joined;         // [B, H + C] dL/d[h_t; c_t] through a_t
  torch::Tensor grad_hidden_direct;  // [B, H] dL/dh_{t-1} through the GRU's z * h_{t-1}
  torch::Tensor grad_input;          // [B, H] dL/dx^l_t, x^l_t = dropout(h^{l-1}_t) the input of layer l >= 1
  torch::Tensor carry_coverage;      // [B, S] dL/dcov_{t+1}; the additive form with coverage
  torch::Tensor grad_keys;           // [B, S, A] dL/d(K + u cov_t) of position t alone; with coverage
  torch::Tensor grad_head_weights;   // [B, S] one head's dL/dw at a time; with N > 1 heads
};

// One thread's part of the backward loop over every position, last to first, from dL/da_t
// [T, B, H] and dL/dw_t [T, B, S] (or undefined); only the rows [0, active[t]) at position t.
// dL/dh_t is carried in grads.initial_hidden, which ends as dL/dh_0.
class BackwardLoop {
 public:
  BackwardLoop(const LoopState& state, const StepProducts& weights, const torch::Tensor& grad_attentional,
               const torch::Tensor& grad_attention, LoopGradients& grads, const BackwardScratch& scratch, Team& team)
      : in_(state.in),
        active_(state.active),
        record_(state.record),
        recorded_(state.recorded),
        weights_(weights),
        grad_attentional_(grad_attentional),
        grad_attention_(grad_attention),
        grads_(grads),
        scratch_(scratch),
        team_(team),
        shape_(in_),
        query_size_(in_.query_size()),
        hidden_columns_(team.share(shape_.size, kColumnMultiple)),
        joined_columns_(team.share(shape_.size + shape_.state_size, kColumnMultiple)),
        carries_(grads.initial_hidden),
        top_carry_(carries_[shape_.layers - 1]) {}

  // Every position, last to first.
  void run() {
    team_.phase([&] { start(); });
    for (int64_t t = shape_.steps - 1; t >= 0; --t) {
      const Position at = position_at(team_, active_, t, shape_.batch);
      team_.phase([&] { combine_backward(at); });
      team_.phase([&] { joined_gradient(at); });
      team_.phase([&] { attention_backward(at); });
      team_.phase([&] { hidden_gradient(at); });
      for (int64_t layer = shape_.layers - 1; layer >= 0; --layer) {  // top to bottom
        const torch::Tensor previous = record_.previous(in_.initial_hidden, layer, t);
        const torch::Tensor carry = carries_[layer];
        // dL/d of this layer's input gates: the first layer's are G_t's (and W_f a_{t-1}'s)
        const torch::Tensor input_gates = layer == 0 ? grads_.gates[t] : grads_.layer_gates[layer - 1][t];
        team_.phase([&] { gru_backward(at, layer, previous, carry, input_gates); });
        team_.phase([&] { carry_back(at, layer, carry, input_gates); });
      }
    }
  }

 private:
  // A row's carries start when it does: dL/da from the loss, dL/dh 0.
  void start() const {
    column_block(scratch_.carry_attentional, hidden_columns_)
        .copy_(column_block(grad_attentional_[shape_.steps - 1], hidden_columns_));
    column_block(carries_, hidden_columns_).zero_();
    if (scratch_.carry_coverage.defined()) column_block(scratch_.carry_coverage, team_.share(shape_.positions)).zero_();
  }

  // dL/d(W_c [h_t; c_t]), this thread's columns.
  void combine_backward(const Position& at) const {
    const int64_t t = at.t, column = hidden_columns_.first, count = hidden_columns_.second - column;
    for (int64_t b = 0; b < at.n && count > 0; ++b) {
      kernels::attentional_vector_backward(scratch_.carry_attentional.data_ptr<float>() + b * shape_.size + column,
                                           row(record_.combined, t, b) + column,
                                           record_.masks.defined() ? row(record_.masks, t, b) + column : nullptr, count,
                                           row(grads_.pre_activation, t, b) + column);
    }
  }

  // dL/d[h_t; c_t] through a_t.
  void joined_gradient(const Position& at) const {
    weights_.combine.multiply(first(grads_.pre_activation[at.t], at.n), {}, first(scratch_.grad_joined, at.n),
                              joined_columns_);
  }

  // Attention: dL/dw_t, the energies, W_q h_t; the states' and keys' sums.
  void attention_backward(const Position& at) const {
    if (!in_.additive()) {
      const std::vector<RecordedBlock>& blocks = recorded_.steps[static_cast<size_t>(at.t)];
      const auto [begin, end] = team_.share(static_cast<int64_t>(blocks.size()));
      for (int64_t k = begin; k < end; ++k) {
        attend_block_backward(blocks[static_cast<size_t>(k)], recorded_, at.t, scratch_.grad_joined, grad_attention_,
                              grads_, grads_.parameters[static_cast<size_t>(team_.index())]);
      }
      return;
    }
    for (int64_t b = at.rows.first; b < at.rows.second; ++b) additive_row_backward(at.t, b);
  }

  // The additive form's step of row b at position t, backward.
  void additive_row_backward(int64_t t, int64_t b) const {
    const float* attention_weights = row(record_.attention, t, b);
    const float* states = in_.states.data_ptr<float>() + b * shape_.positions * shape_.state_size;
    const float* grad_context =
        scratch_.grad_joined.data_ptr<float>() + b * (shape_.size + shape_.state_size) + shape_.size;
    float* grad = row(grads_.scores, t, b);
    float* grad_states = grads_.states.data_ptr<float>() + b * shape_.positions * shape_.state_size;
    float* grad_keys = grads_.keys.data_ptr<float>() + b * shape_.positions * shape_.key_size;
    if (in_.heads > 1) {  // each head's dL/dw and energies' gradient, then the kernel's backward over all heads
      heads_backward(row(record_.head_weights, t, b), states, grad_context,
                     grad_attention_.defined() ? row(grad_attention_, t, b) : nullptr, shape_.positions, in_.heads,
                     shape_.state_size, scratch_.grad_head_weights.data_ptr<float>() + b * shape_.positions, grad,
                     grad_states);
      kernels::additive_energy_backward(row(record_.activations, t, b), in_.energy.data_ptr<float>(), grad, 1,
                                        shape_.positions, shape_.key_size, in_.heads, grad_keys,
                                        row(grads_.query, t, b),
                                        /*accumulate_keys=*/true);
      return;
    }
    kernels::weighted_sum_backward(attention_weights, states, grad_context, 1, shape_.positions, shape_.state_size,
                                   grad, grad_states, /*accumulate_states=*/true);
    if (grad_attention_.defined()) add_row(row(grad_attention_, t, b), shape_.positions, grad);
    float* carry = in_.covered() ? scratch_.carry_coverage.data_ptr<float>() + b * shape_.positions : nullptr;
    if (in_.covered()) add_row(carry, shape_.positions, grad);        // w_t is in every later coverage: dL/dcov_{t+1}
    softmax_row_backward(attention_weights, grad, shape_.positions);  // 0 at padded positions, whose weight is 0
    if (!in_.covered()) {
      kernels::additive_energy_backward(row(record_.activations, t, b), in_.energy.data_ptr<float>(), grad, 1,
                                        shape_.positions, shape_.key_size, /*heads=*/1, grad_keys,
                                        row(grads_.query, t, b),
                                        /*accumulate_keys=*/true);
      return;
    }
    // With coverage the kernel's key gradient is dL/d(K + u cov_t): added to K's, and read for
    // dL/du and dL/dcov_t (carried on to t - 1 with the part from t + 1).
    float* step_keys = scratch_.grad_keys.data_ptr<float>() + b * shape_.positions * shape_.key_size;
    kernels::additive_energy_backward(row(record_.activations, t, b), in_.energy.data_ptr<float>(), grad, 1,
                                      shape_.positions, shape_.key_size, /*heads=*/1, step_keys,
                                      row(grads_.query, t, b),
                                      /*accumulate_keys=*/false);
    cover_keys_backward(step_keys, row(record_.coverage, t, b), in_.coverage_weight.data_ptr<float>(), shape_.positions,
                        shape_.key_size, grad_keys, grads_.coverage_weight.data_ptr<float>() + b * shape_.key_size,
                        carry);
  }

  // dL/dh_t: carried from t + 1, plus the combine layer's and the query's parts.
  void hidden_gradient(const Position& at) const {
    const int64_t t = at.t, n = at.n;
    first(column_block(top_carry_, hidden_columns_), n)
        .add_(first(column_block(scratch_.grad_joined, hidden_columns_), n));
    if (in_.additive()) {
      weights_.query.multiply(first(grads_.query[t], n), first(top_carry_, n), first(top_carry_, n), hidden_columns_);
    } else {
      first(column_block(top_carry_, hidden_columns_), n)
          .add_(first(column_block(grads_.query[t], hidden_columns_), n));
      if (in_.projection.defined()) {  // and through W h_t
        weights_.projection.multiply(first(grads_.projected[t], n), first(top_carry_, n), first(top_carry_, n),
                                     hidden_columns_);
      }
    }
  }

  // The GRU step's backward; ended rows get 0 in what the products after the loop read.
  void gru_backward(const Position& at, int64_t layer, const torch::Tensor& previous, const torch::Tensor& carry,
                    const torch::Tensor& input_gates) const {
    const int64_t t = at.t;
    for (int64_t b = at.rows.first; b < at.rows.second; ++b) {
      kernels::gru_step_backward(carry.data_ptr<float>() + b * shape_.size, row(record_.gru_saved[layer], t, b),
                                 previous.data_ptr<float>() + b * previous.stride(0), 1, shape_.size,
                                 input_gates.data_ptr<float>() + b * 3 * shape_.size,
                                 row(grads_.hidden_gates[layer], t, b),
                                 scratch_.grad_hidden_direct.data_ptr<float>() + b * shape_.size);
    }
    for (int64_t b = at.ended.first; b < at.ended.second; ++b) {
      zero(input_gates.data_ptr<float>() + b * 3 * shape_.size, 3 * shape_.size);
      zero(row(grads_.hidden_gates[layer], t, b), 3 * shape_.size);
      if (layer == shape_.layers - 1) {
        zero(row(grads_.query, t, b), query_size_);
        if (grads_.projected.defined()) zero(row(grads_.projected, t, b), grads_.projected.size(2));
        if (grads_.scores.defined()) zero(row(grads_.scores, t, b), grads_.scores.size(2));
        zero(row(grads_.pre_activation, t, b), shape_.size);
      }
    }
  }

  // The carries to t - 1 (and to the layer below at t), this thread's columns.
  void carry_back(const Position& at, int64_t layer, const torch::Tensor& carry,
                  const torch::Tensor& input_gates) const {
    const auto l = static_cast<size_t>(layer);
    const int64_t t = at.t, n = at.n;
    weights_.hidden[l].multiply(first(grads_.hidden_gates[layer][t], n), first(scratch_.grad_hidden_direct, n),
                                first(carry, n), hidden_columns_);
    if (layer > 0) {  // dL/dh^{l-1}_t += mask * W_l^T dL/dgi^l_t
      weights_.layer_gates[l - 1].multiply(first(input_gates, n), {}, first(scratch_.grad_input, n), hidden_columns_);
      const torch::Tensor below = first(column_block(carries_[layer - 1], hidden_columns_), n);
      const torch::Tensor gradient = first(column_block(scratch_.grad_input, hidden_columns_), n);
      if (record_.layer_masks.defined()) {
        below.addcmul_(gradient, first(column_block(record_.layer_masks[layer - 1][t], hidden_columns_), n));
      } else {
        below.add_(gradient);
      }
    } else if (t > 0) {  // dL/da_{t-1}: from the loss, and from input feeding into position t
      weights_.feed.multiply(first(grads_.gates[t], n), first(grad_attentional_[t - 1], n),
                             first(scratch_.carry_attentional, n), hidden_columns_);
      const int64_t rest = shape_.batch - n;  // rows that start at t - 1 (or later): the loss's part only
      column_block(scratch_.carry_attentional.narrow(0, n, rest), hidden_columns_)
          .copy_(column_block(grad_attentional_[t - 1].narrow(0, n, rest), hidden_columns_));
    }
  }

  const LoopInputs& in_;
  const std::vector<int64_t>& active_;
  const LoopRecord& record_;
  const RecordedAttention& recorded_;
  const StepProducts& weights_;
  const torch::Tensor& grad_attentional_;
  const torch::Tensor& grad_attention_;
  LoopGradients& grads_;  // written through its tensors, and this thread's parameter sums
  const BackwardScratch& scratch_;
  Team& team_;
  const LoopShape shape_;
  const int64_t query_size_;
  const std::pair<int64_t, int64_t> hidden_columns_, joined_columns_;
  const torch::Tensor& carries_;   // [L, B, H] dL/dh^l_t
  const torch::Tensor top_carry_;  // the top layer's, which attention reads
};

// The backward loop's outputs, allocated (the sums zeroed); parameter_count: the attention
// module's parameters, whose gradients each thread sums on its own.
LoopGradients make_gradients(const LoopInputs& in, size_t parameter_count) {
  const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.size(), layers = in.layers();
  const auto options = in.gates.options();
  LoopGradients grads;
  grads.gates = torch::empty({steps, batch, 3 * size}, options);
  grads.layer_gates = torch::empty({layers - 1, steps, batch, 3 * size}, options);
  grads.hidden_gates = torch::empty({layers, steps, batch, 3 * size}, options);
  grads.query = torch::empty({steps, batch, in.query_size()}, options);
  if (in.additive()) grads.scores = torch::empty({steps, batch, in.keys.size(1) * in.heads}, options);
  if (in.projection.defined()) grads.projected = torch::empty({steps, batch, in.projection.size(0)}, options);
  grads.pre_activation = torch::empty({steps, batch, size}, options);
  grads.states = torch::zeros_like(in.states);
  grads.keys = torch::zeros_like(in.keys);
  grads.initial_hidden = torch::empty_like(in.initial_hidden);
  grads.parameters.assign(static_cast<size_t>(std::max(1, at::get_num_threads())),
                          std::vector<torch::Tensor>(parameter_count));
  return grads;
}

// [T, B, n] -> [T * B, n]
torch::Tensor all_rows(const torch::Tensor& tensor) { return tensor.flatten(0, 1); }

// The recurrence's weights W_f, W_h, b_h, W_l, b_l into `result`.
void recurrence_gradients(const LoopState& state, const LoopGradients& grads, InputGradients& result) {
  const LoopInputs& in = state.in;
  const LoopRecord& record = state.record;
  const int64_t steps = in.gates.size(0), layers = in.layers(), size = in.size();
  const auto outputs = [&](int64_t layer) {  // h^l_1 .. h^l_T [T, B, H]
    return layer == layers - 1 ? record.joined.narrow(2, 0, size) : record.lower[layer];
  };
  result.feed = torch::zeros_like(in.feed);  // a_0 = 0 feeds nothing
  if (steps > 1) {
    result.feed.add_(training_product(all_rows(grads.gates.narrow(0, 1, steps - 1)).t(),
                                      all_rows(record.attentional.narrow(0, 0, steps - 1))));
  }
  for (int64_t layer = 0; layer < layers; ++layer) {  // W_h: h^l_0 feeds position 0, h^l_{t-1} position t
    const torch::Tensor hidden_gates = grads.hidden_gates[layer];
    torch::Tensor grad_hidden = hidden_gates[0].t().mm(in.initial_hidden[layer]);
    if (steps > 1) {
      grad_hidden.add_(training_product(all_rows(hidden_gates.narrow(0, 1, steps - 1)).t(),
                                        all_rows(outputs(layer).narrow(0, 0, steps - 1))));
    }
    result.hidden.push_back(grad_hidden);
    result.hidden_bias.push_back(all_rows(hidden_gates).sum(0));
    if (layer > 0) {  // W_l, b_l: the layer's input x^l_t at every position
      const torch::Tensor input_gates = grads.layer_gates[layer - 1];
      result.layer_gates.push_back(
          training_product(all_rows(input_gates).t(), all_rows(record.layer_inputs[layer - 1])));
      result.layer_bias.push_back(all_rows(input_gates).sum(0));
    }
  }
}

// The attention step's and the combine layer's weights into `result`: W_q, v, u of the additive
// form, W of any other scorer's query map, the attention module's parameters, W_c.
void attention_gradients(const LoopState& state, const LoopGradients& grads, InputGradients& result) {
  const LoopInputs& in = state.in;
  const torch::Tensor top = state.record.joined.narrow(2, 0, in.size());  // h_1 .. h_T [T, B, H]
  if (in.additive()) {
    result.query = training_product(all_rows(grads.query).t(), all_rows(top));
    // v: head n's slice of A from the activations of that slice and head n's energy gradients
    const int64_t key_size = in.keys.size(2), slice = key_size / in.heads;
    const torch::Tensor activations = state.record.activations.view({-1, key_size});  // [T B S, A]
    const torch::Tensor scores = grads.scores.view({-1, in.heads});                   // [T B S, N]
    result.energy = torch::empty({key_size}, in.gates.options());
    for (int64_t n = 0; n < in.heads; ++n) {
      result.energy.narrow(0, n * slice, slice)
          .copy_(activations.narrow(1, n * slice, slice).t().mv(scores.select(1, n)));
    }
    if (in.covered()) result.coverage_weight = grads.coverage_weight.sum(0);  // u: the rows' sums
  }
  // W of a scorer's query map: one product over all positions, as W_q's
  if (in.projection.defined()) result.projection = training_product(all_rows(grads.projected).t(), all_rows(top));
  result.combine = training_product(all_rows(grads.pre_activation).t(), all_rows(state.record.joined));  // W_c
  for (size_t i = 0; i < state.recorded.parameters.size(); ++i) {  // the threads' sums
    torch::Tensor sum;
    for (const auto& thread : grads.parameters) {
      if (thread[i].defined()) sum = sum.defined() ? sum.add_(thread[i]) : thread[i];
    }
    result.parameters.push_back(sum);
  }
}

}  // namespace

InputGradients backward_pass(const LoopState& state, const torch::Tensor& grad_attentional_in,
                             const torch::Tensor& grad_attention_in) {
  const LoopInputs& in = state.in;
  const int64_t batch = in.gates.size(1), size = in.size();
  const auto options = in.gates.options();
  const torch::Tensor grad_attentional =
      grad_attentional_in.defined() ? grad_attentional_in.contiguous() : torch::zeros_like(state.record.attentional);
  const torch::Tensor grad_attention = grad_attention_in.defined() ? grad_attention_in.contiguous() : torch::Tensor();
  LoopGradients grads = make_gradients(in, state.recorded.parameters.size());
  BackwardScratch scratch(batch, size, in.states.size(2), options);
  if (in.covered()) {
    scratch.carry_coverage = torch::empty({batch, in.keys.size(1)}, options);
    scratch.grad_keys = torch::empty_like(in.keys);
    grads.coverage_weight = torch::zeros({batch, in.keys.size(2)}, options);
  }
  if (in.heads > 1) scratch.grad_head_weights = torch::empty({batch, in.keys.size(1)}, options);
  const StepProducts weights(in, /*forward=*/false);
  run_as_team(
      [&](Team& team) { BackwardLoop(state, weights, grad_attentional, grad_attention, grads, scratch, team).run(); });

  InputGradients result;
  result.gates = grads.gates, result.initial_hidden = grads.initial_hidden;
  result.states = grads.states, result.keys = grads.keys;
  recurrence_gradients(state, grads, result);
  attention_gradients(state, grads, result);
  return result;
}

}  // namespace nmt::fused_decoder
