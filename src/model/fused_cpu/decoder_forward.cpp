// The fused decoder loop's forward pass (fused_cpu/decoder_forward.h): the record and the dropout
// masks made before the loop, then each thread's part of the loop, one member function per phase
// of a position.
#include "model/fused_cpu/decoder_forward.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/gru_kernels.h"
#include "kernels/row_kernels.h"
#include "model/dropout.h"
#include "model/fused_cpu/decoder_rows.h"

namespace nmt::fused_decoder {
namespace {

// Per-step scratch of the forward loop, shared by the team (each thread writes its own block).
struct ForwardScratch {
  ForwardScratch(int64_t batch, int64_t size, int64_t key_size, const torch::TensorOptions& options)
      : input_gates(torch::empty({batch, 3 * size}, options)),
        hidden_gates(torch::empty({batch, 3 * size}, options)),
        query(torch::empty({batch, key_size}, options)),
        pre_activation(torch::empty({batch, size}, options)) {}
  torch::Tensor input_gates, hidden_gates;  // [B, 3H] gi_t, W_h h_{t-1} + b_h
  torch::Tensor query;                      // [B, A] W_q h_t
  torch::Tensor pre_activation;             // [B, H] W_c [h_t; c_t]
  torch::Tensor covered_keys;               // [B, S, A] K + u cov_t; the additive form with coverage
  torch::Tensor head_scores;                // [B, S, N] the energies of N > 1 heads
};

// One thread's part of the forward loop over every position. At position t only the rows
// [0, active[t]) run; the rest have ended (target padding) and keep 0.
class ForwardLoop {
 public:
  ForwardLoop(LoopState& state, const StepProducts& weights, const ForwardScratch& scratch, Team& team)
      : in_(state.in),
        active_(state.active),
        out_(state.record),
        recorded_(state.recorded),
        weights_(weights),
        scratch_(scratch),
        team_(team),
        shape_(in_),
        gate_columns_(team.share(3 * shape_.size, kColumnMultiple)),
        query_columns_(team.share(in_.additive() ? shape_.key_size : 0, kColumnMultiple)),
        projection_columns_(team.share(in_.projection.defined() ? in_.projection.size(0) : 0, kColumnMultiple)),
        hidden_columns_(team.share(shape_.size, kColumnMultiple)),
        source_mask_(in_.mask.data_ptr<bool>()) {}

  // Every position, first to last.
  void run() {
    for (int64_t t = 0; t < shape_.steps; ++t) {
      const Position at = position_at(team_, active_, t, shape_.batch);
      for (int64_t layer = 0; layer < shape_.layers; ++layer) {
        const torch::Tensor previous = out_.previous(in_.initial_hidden, layer, t);  // h^l_{t-1}
        const torch::Tensor output = out_.output(layer, t);                          // h^l_t, written here
        const torch::Tensor gi = layer == 0 && t == 0 ? in_.gates[0] : scratch_.input_gates;
        team_.phase([&] { gate_products(at, layer, previous); });
        team_.phase([&] { gru_rows(at, layer, gi, previous, output); });
      }
      if (in_.projection.defined()) team_.phase([&] { project(at); });
      if (!in_.additive()) {
        team_.phase([&] { attend_recorded(at); });
      } else {
        team_.phase([&] { query_product(at); });
        team_.phase([&] { attend_additive(at); });
      }
      team_.phase([&] { combine(at); });
    }
  }

 private:
  // The input gates (layer 0: G_t + W_f a_{t-1}; above: W_l x + b_l) and W_h h_{t-1} + b_h.
  void gate_products(const Position& at, int64_t layer, const torch::Tensor& previous) const {
    const auto l = static_cast<size_t>(layer);
    const int64_t t = at.t, n = at.n;
    if (layer > 0) {
      weights_.layer_gates[l - 1].multiply(first(out_.layer_inputs[layer - 1][t], n), in_.layer_bias[l - 1],
                                           first(scratch_.input_gates, n), gate_columns_);
    } else if (t > 0) {
      weights_.feed.multiply(first(out_.attentional[t - 1], n), first(in_.gates[t], n), first(scratch_.input_gates, n),
                             gate_columns_);
    }
    weights_.hidden[l].multiply(first(previous, n), in_.hidden_bias[l], first(scratch_.hidden_gates, n), gate_columns_);
  }

  // h^l_t (the top layer's into the first H columns of joined[t]); the next layer's input.
  void gru_rows(const Position& at, int64_t layer, const torch::Tensor& gi, const torch::Tensor& previous,
                const torch::Tensor& output) const {
    const int64_t t = at.t;
    for (int64_t b = at.rows.first; b < at.rows.second; ++b) {
      float* h = output.data_ptr<float>() + b * output.stride(0);
      kernels::gru_step(
          gi.data_ptr<float>() + b * gi.stride(0), scratch_.hidden_gates.data_ptr<float>() + b * 3 * shape_.size,
          previous.data_ptr<float>() + b * previous.stride(0), 1, shape_.size, h, row(out_.gru_saved[layer], t, b));
      if (layer + 1 < shape_.layers) {  // dropout between layers
        float* input = row(out_.layer_inputs[layer], t, b);
        const float* mask = out_.layer_masks.defined() ? row(out_.layer_masks[layer], t, b) : nullptr;
        for (int64_t i = 0; i < shape_.size; ++i) input[i] = mask != nullptr ? h[i] * mask[i] : h[i];
      }
    }
    for (int64_t b = at.ended.first; b < at.ended.second; ++b) {
      zero(output.data_ptr<float>() + b * output.stride(0),
           layer + 1 < shape_.layers ? shape_.size : shape_.size + shape_.state_size);
      if (layer + 1 < shape_.layers) zero(row(out_.layer_inputs[layer], t, b), shape_.size);
    }
  }

  // W h_t of a scorer with a query weight.
  void project(const Position& at) const {
    weights_.projection.multiply(first(out_.joined[at.t].narrow(1, 0, shape_.size), at.n), {},
                                 first(out_.projected[at.t], at.n), projection_columns_);
  }

  // Any scorer: w_t and c_t of this thread's rows, recorded.
  void attend_recorded(const Position& at) const {
    attend_block(in_, recorded_, at.t, at.rows.first, at.rows.second - at.rows.first, out_,
                 recorded_.steps[static_cast<size_t>(at.t)][static_cast<size_t>(team_.index())]);
  }

  // W_q h_t.
  void query_product(const Position& at) const {
    weights_.query.multiply(first(out_.joined[at.t].narrow(1, 0, shape_.size), at.n), {}, first(scratch_.query, at.n),
                            query_columns_);
  }

  // w_t, and c_t into the last C columns of joined[t].
  void attend_additive(const Position& at) const {
    for (int64_t b = at.rows.first; b < at.rows.second; ++b) additive_row(at.t, b);
    for (int64_t b = at.ended.first; b < at.ended.second; ++b)
      zero(row(out_.activations, at.t, b), shape_.positions * shape_.key_size);
  }

  // The additive form's step of row b at position t.
  void additive_row(int64_t t, int64_t b) const {
    float* attention_weights = row(out_.attention, t, b);
    const float* keys = in_.keys.data_ptr<float>() + b * shape_.positions * shape_.key_size;
    if (in_.covered()) {  // K + u cov_t
      float* covered = scratch_.covered_keys.data_ptr<float>() + b * shape_.positions * shape_.key_size;
      cover_keys(keys, row(out_.coverage, t, b), in_.coverage_weight.data_ptr<float>(), shape_.positions,
                 shape_.key_size, covered);
      keys = covered;
    }
    const int64_t length = real_positions(source_mask_ + b * shape_.positions, shape_.positions);
    const float* states = in_.states.data_ptr<float>() + b * shape_.positions * shape_.state_size;
    if (in_.heads > 1) {
      float* scores = scratch_.head_scores.data_ptr<float>() + b * shape_.positions * in_.heads;
      kernels::additive_energy(keys, scratch_.query.data_ptr<float>() + b * shape_.key_size,
                               in_.energy.data_ptr<float>(), 1, shape_.positions, shape_.key_size, in_.heads,
                               /*mask=*/nullptr, scores, row(out_.activations, t, b));
      heads_forward(scores, length, shape_.positions, in_.heads, states, shape_.state_size,
                    row(out_.head_weights, t, b), row(out_.joined, t, b) + shape_.size, attention_weights);
      return;
    }
    kernels::additive_energy(keys, scratch_.query.data_ptr<float>() + b * shape_.key_size, in_.energy.data_ptr<float>(),
                             1, shape_.positions, shape_.key_size, /*heads=*/1, /*mask=*/nullptr, attention_weights,
                             row(out_.activations, t, b));
    kernels::prefix_softmax(attention_weights, length, shape_.positions);
    kernels::weighted_sum(attention_weights, states, 1, shape_.positions, shape_.state_size,
                          row(out_.joined, t, b) + shape_.size);
    if (in_.covered() && t + 1 < shape_.steps) {  // cov_{t+1} = cov_t + w_t
      advance_coverage(row(out_.coverage, t, b), attention_weights, shape_.positions, row(out_.coverage, t + 1, b));
    }
  }

  // a_t = dropout(tanh(W_c [h_t; c_t])), this thread's columns.
  void combine(const Position& at) const {
    const int64_t t = at.t, n = at.n;
    weights_.combine.multiply(first(out_.joined[t], n), {}, first(scratch_.pre_activation, n), hidden_columns_);
    const int64_t column = hidden_columns_.first, count = hidden_columns_.second - column;
    for (int64_t b = 0; b < n && count > 0; ++b) {
      kernels::attentional_vector(scratch_.pre_activation.data_ptr<float>() + b * shape_.size + column,
                                  out_.masks.defined() ? row(out_.masks, t, b) + column : nullptr, count,
                                  row(out_.combined, t, b) + column, row(out_.attentional, t, b) + column);
    }
  }

  const LoopInputs& in_;
  const std::vector<int64_t>& active_;
  const LoopRecord& out_;  // written through its tensors
  RecordedAttention& recorded_;
  const StepProducts& weights_;
  const ForwardScratch& scratch_;
  Team& team_;
  const LoopShape shape_;
  const std::pair<int64_t, int64_t> gate_columns_, query_columns_, projection_columns_, hidden_columns_;
  const bool* source_mask_;
};

// The record's tensors, and the dropout masks, drawn before the loop.
LoopRecord make_record(const LoopInputs& in, double dropout) {
  const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.size(), layers = in.layers();
  const int64_t positions = in.keys.size(1), key_size = in.keys.size(2), state_size = in.states.size(2);
  const auto options = in.gates.options();
  LoopRecord record;
  record.hidden_size = size;
  record.attentional = torch::zeros({steps, batch, size}, options);  // stays 0 where a row has ended
  record.attention = torch::zeros({steps, batch, positions}, options);
  record.joined = torch::empty({steps, batch, size + state_size}, options);
  record.lower = torch::empty({layers - 1, steps, batch, size}, options);
  record.layer_inputs = torch::empty({layers - 1, steps, batch, size}, options);
  record.gru_saved = torch::empty({layers, steps, batch, 4 * size}, options);
  if (in.additive()) record.activations = torch::empty({steps, batch, positions, key_size}, options);
  record.combined = torch::empty({steps, batch, size}, options);
  if (dropout > 0) {
    // Drawn before the loop in the order the per-step path draws them: per position, one [B, H]
    // mask for the input of each layer above the first, then one for a_t.
    record.masks = torch::empty({steps, batch, size}, options);
    if (layers > 1) record.layer_masks = torch::empty({layers - 1, steps, batch, size}, options);
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t layer = 1; layer < layers; ++layer) {
        record.layer_masks[layer - 1][t].copy_(dropout_mask({batch, size}, dropout, options));
      }
      record.masks[t].copy_(dropout_mask({batch, size}, dropout, options));
    }
  }
  return record;
}

}  // namespace

void forward_pass(LoopState& state, double dropout) {
  const LoopInputs& in = state.in;
  const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.size();
  const int64_t positions = in.keys.size(1), key_size = in.keys.size(2);
  const auto options = in.gates.options();
  LoopRecord& record = state.record;
  record = make_record(in, dropout);
  if (!in.additive()) {
    state.recorded.steps.assign(static_cast<size_t>(steps),
                                std::vector<RecordedBlock>(static_cast<size_t>(std::max(1, at::get_num_threads()))));
    if (in.projection.defined()) record.projected = torch::empty({steps, batch, in.projection.size(0)}, options);
  }
  ForwardScratch scratch(batch, size, key_size, options);
  if (in.covered()) {
    record.coverage = torch::zeros({steps, batch, positions}, options);  // cov_0 = 0
    scratch.covered_keys = torch::empty_like(in.keys);
  }
  if (in.heads > 1) {
    record.head_weights = torch::empty({steps, batch, in.heads, positions}, options);
    scratch.head_scores = torch::empty({batch, positions, in.heads}, options);
  }
  const StepProducts weights(in, /*forward=*/true);
  run_as_team([&](Team& team) { ForwardLoop(state, weights, scratch, team).run(); });
}

}  // namespace nmt::fused_decoder
