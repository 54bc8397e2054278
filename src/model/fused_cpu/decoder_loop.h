// What the fused decoder loop's forward and backward share (fused_cpu/decoder_pass.h has the maths and the
// shapes): the function's inputs, its weights as the loop's products use them, what the forward
// loop records for the backward and what the backward loop writes, and how the loops index rows,
// columns and positions.
#pragma once

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/packed_gemm.h"
#include "model/linear/loop_weight.h"
#include "util/team.h"

namespace nmt::fused_decoder {

// The loops run on a team (util/team.h) that goes through each step's phases together. In a
// product phase each thread computes a block of the output's columns (LoopWeight::multiply on
// one thread): each thread then reads only its part of each weight, and the product keeps all
// the batch rows. In a row phase (the GRU and attention kernels) each thread takes a block of the
// batch rows.
constexpr int64_t kColumnMultiple = kernels::kPanelWidth;  // LoopWeight's column blocks start on a panel

inline float* row(const torch::Tensor& tensor, int64_t t, int64_t b) {  // &tensor[t][b][0] of a [T, B, ...] tensor
  return tensor.data_ptr<float>() + t * tensor.stride(0) + b * tensor.stride(1);
}

// The first n rows of a [B, ...] tensor.
inline torch::Tensor first(const torch::Tensor& tensor, int64_t n) { return tensor.narrow(0, 0, n); }

// Zeroes `count` floats (rows of a record that the loop skips, which the products after it read).
inline void zero(float* to, int64_t count) { std::fill(to, to + count, 0.0f); }

// One position of a loop as one thread sees it. Only the rows [0, n) run; the rest have ended
// (target padding).
struct Position {
  int64_t t = 0;                            // the target position
  int64_t n = 0;                            // the rows that run: [0, n)
  std::pair<int64_t, int64_t> rows, ended;  // this thread's share of [0, n) and of [n, B)
};

// Position t of a loop over `batch` rows, active[t] of them running.
inline Position position_at(const Team& team, const std::vector<int64_t>& active, int64_t t, int64_t batch) {
  const int64_t n = active[static_cast<size_t>(t)];
  return {t, n, team.rows(0, n), team.rows(n, batch)};
}

// The function's inputs (all contiguous).
struct LoopInputs {
  torch::Tensor gates;                                 // [T, B, 3H]
  torch::Tensor initial_hidden;                        // [L, B, H]
  torch::Tensor states, keys;                          // [B, S, C], [B, S, K]
  torch::Tensor mask;                                  // [B, S] bool
  torch::Tensor feed;                                  // as FusedDecoderWeights, and the rest below
  std::vector<torch::Tensor> hidden, hidden_bias;      // L
  std::vector<torch::Tensor> layer_gates, layer_bias;  // L - 1
  torch::Tensor query, energy;
  torch::Tensor coverage_weight;  // [A] u of the additive form with coverage, or undefined
  torch::Tensor projection;       // [P, H] any other scorer's query_weight(), or undefined
  torch::Tensor combine;
  int64_t heads = 1;  // the additive form's (AdditiveForm::heads)

  int64_t layers() const { return static_cast<int64_t>(hidden.size()); }
  int64_t size() const { return initial_hidden.size(2); }
  // The additive form runs on the loop's kernels; otherwise AttentionImpl::forward runs the step.
  bool additive() const { return query.defined(); }
  bool covered() const { return coverage_weight.defined(); }  // the additive form with coverage
  // The size of the vector the attention step reads: W_q h_t (A) for the additive form, else h_t.
  int64_t query_size() const { return additive() ? keys.size(2) : size(); }
};

// The sizes both loops read off their inputs: T positions, B rows, H hidden, L layers, S source
// positions, K key size, C state size.
struct LoopShape {
  explicit LoopShape(const LoopInputs& in)
      : steps(in.gates.size(0)),
        batch(in.gates.size(1)),
        size(in.size()),
        layers(in.layers()),
        positions(in.keys.size(1)),
        key_size(in.keys.size(2)),
        state_size(in.states.size(2)) {}
  const int64_t steps, batch, size, layers, positions, key_size, state_size;
};

// The loop's weights as the products use them: transposed in the forward (x W^T). W_q only for
// the additive form, the projection W only for any other scorer with a query_weight().
struct StepProducts {
  StepProducts(const LoopInputs& in, bool forward)
      : feed(forward ? in.feed.t() : in.feed),
        query(in.additive() ? LoopWeight(forward ? in.query.t() : in.query) : LoopWeight()),
        projection(in.projection.defined() ? LoopWeight(forward ? in.projection.t() : in.projection) : LoopWeight()),
        combine(forward ? in.combine.t() : in.combine) {
    for (const torch::Tensor& weight : in.hidden) hidden.emplace_back(forward ? weight.t() : weight);
    for (const torch::Tensor& weight : in.layer_gates) layer_gates.emplace_back(forward ? weight.t() : weight);
  }
  LoopWeight feed;
  std::vector<LoopWeight> hidden;       // W_h of each layer
  std::vector<LoopWeight> layer_gates;  // W_l of each layer above the first (its input h^{l-1}_t)
  LoopWeight query, projection, combine;
};

// What the forward loop writes: the outputs and what the backward needs.
struct LoopRecord {
  torch::Tensor attentional;   // [T, B, H] output a_t
  torch::Tensor attention;     // [T, B, S] output w_t
  torch::Tensor joined;        // [T, B, H + C] [h_t; c_t] of the top layer, the combine layer's input
  torch::Tensor lower;         // [L - 1, T, B, H] h^l_t of the layers below the top
  torch::Tensor layer_inputs;  // [L - 1, T, B, H] dropout(h^{l-1}_t), the input of layer l >= 1
  torch::Tensor layer_masks;   // [L - 1, T, B, H] its dropout masks; undefined without dropout
  torch::Tensor gru_saved;     // [L, T, B, 4H] the GRU kernel's (r, z, n, gh_n)
  torch::Tensor activations;   // [T, B, S, A] tanh(K (+ u cov_t) + W_q h_t); the additive form only
  torch::Tensor head_weights;  // [T, B, N, S] each head's weights; the additive form with N > 1 heads
  torch::Tensor combined;      // [T, B, H] tanh(W_c [h_t; c_t]) before dropout
  torch::Tensor masks;         // [T, B, H] dropout masks; undefined without dropout
  torch::Tensor coverage;      // [T, B, S] cov_t, the coverage step t reads; the additive form with coverage
  torch::Tensor projected;     // [T, B, P] W h_t for any other scorer with a query_weight()

  // h^layer_t [B, H] (a view), and h^layer_{t-1} (the initial state at t = 0).
  torch::Tensor output(int64_t layer, int64_t t) const {
    return layer == gru_saved.size(0) - 1 ? joined[t].narrow(1, 0, hidden_size) : lower[layer][t];
  }
  torch::Tensor previous(const torch::Tensor& initial_hidden, int64_t layer, int64_t t) const {
    return t == 0 ? initial_hidden[layer] : output(layer, t - 1);
  }
  int64_t hidden_size = 0;  // H
};

// What the backward loop writes: per-position gradients (for the weight gradients after the
// loop) and the gradients of the inputs that are not weights.
struct LoopGradients {
  torch::Tensor gates;                                 // [T, B, 3H] dL/dgi_t = dL/dG_t, the first layer's
  torch::Tensor layer_gates;                           // [L - 1, T, B, 3H] dL/d(W_l x + b_l), the layers above
  torch::Tensor hidden_gates;                          // [L, T, B, 3H] dL/d(W_h h_{t-1} + b_h)
  torch::Tensor query;                                 // [T, B, A] dL/d(W_q h_t); any other scorer: [T, B, H] dL/dh_t
  torch::Tensor projected;                             // [T, B, P] dL/d(W h_t), LoopRecord::projected's
  torch::Tensor scores;                                // [T, B, S N] dL/d energies (rows [S, N] with N heads)
  torch::Tensor pre_activation;                        // [T, B, H] dL/d(W_c [h_t; c_t])
  torch::Tensor states, keys;                          // [B, S, C], [B, S, A], summed over positions
  torch::Tensor coverage_weight;                       // [B, A] dL/du per row, summed over positions
  torch::Tensor initial_hidden;                        // [L, B, H]; in the loop, the carries dL/dh^l_t
  std::vector<std::vector<torch::Tensor>> parameters;  // [thread][parameter] the attention module's, summed
};

}  // namespace nmt::fused_decoder
