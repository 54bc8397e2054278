#include "model/decoder_fused.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/gru_kernels.h"
#include "kernels/packed_gemm.h"
#include "kernels/row_kernels.h"
#include "model/dropout.h"
#include "model/loop_weight.h"
#include "util/team.h"

namespace nmt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The loops run on a team (util/team.h) that goes through each step's phases together. In a
// product phase each thread computes a block of the output's columns (LoopWeight::multiply on
// one thread): each thread then reads only its part of each weight, and the product keeps all
// the batch rows. In a row phase (the GRU and attention kernels) each thread takes a block of the
// batch rows.
constexpr int64_t kColumnMultiple = kernels::kPanelWidth;  // LoopWeight's column blocks start on a panel

// The number of real positions of a source mask row [S] (a prefix: make_source_mask).
int64_t real_positions(const bool* mask, int64_t positions) {
  int64_t length = 0;
  while (length < positions && mask[length]) ++length;
  for (int64_t s = length; s < positions; ++s) {
    if (mask[s]) throw std::logic_error("fused decoder loop: a source mask row is not a prefix (make_source_mask)");
  }
  if (length == 0) throw std::logic_error("fused decoder loop: a source mask row has no real position");
  return length;
}

// The softmax's backward in place: grad <- w * (grad - sum_s w_s grad_s).
void softmax_row_backward(const float* weights, float* grad, int64_t positions) {
  float dot = 0;
  for (int64_t s = 0; s < positions; ++s) dot += weights[s] * grad[s];
  for (int64_t s = 0; s < positions; ++s) grad[s] = weights[s] * (grad[s] - dot);
}

// Multi-head attention of one row from its energies scores [S, N]: head n's weights
// head_weights[n] [S] = the softmax of scores[:, n] over the `length` real positions, its context
// the weighted sum of its slice of C / N state columns (into context [C]); mean_weights [S] the
// heads' mean (the weights the decoder returns).
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

// Its backward: from dL/dcontext [C] and dL/dmean_weights [S] (or null), dL/dscores [S, N] into
// grad_scores, and each head's part of dL/dstates added to grad_states [S, C]. grad_weights: [S]
// scratch.
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

float* row(const torch::Tensor& tensor, int64_t t, int64_t b) {  // &tensor[t][b][0] of a [T, B, ...] tensor
  return tensor.data_ptr<float>() + t * tensor.stride(0) + b * tensor.stride(1);
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

// One thread's block of rows at one position, with autograd's record of its attention step
// (the step of any scorer but the additive form).
struct RecordedBlock {
  int64_t first = 0, count = 0;                  // rows [first, first + count)
  torch::Tensor query, projected, keys, states;  // the block's inputs, leaves: [n, H], [n, P], [n, S, K],
                                                 // [n, S, C]
  torch::Tensor context, weights;                // AttentionImpl::forward's outputs [n, C], [n, S]
};

// The attention steps the forward loop recorded, kept for the backward (in the autograd
// context's saved_data, as a capsule).
struct RecordedAttention : torch::CustomClassHolder {
  AttentionImpl* attention = nullptr;
  std::vector<torch::Tensor> parameters;          // the attention module's
  std::vector<std::vector<RecordedBlock>> steps;  // [T][thread]
};

// The attention step of rows [first, first + count) at position t: AttentionImpl::forward on
// leaves holding the block's h_t (and W h_t), keys and states, recorded by autograd; writes w_t
// into record.attention and c_t into record.joined.
void attend_block(const LoopInputs& in, const RecordedAttention& recorded, int64_t t, int64_t first, int64_t count,
                  const struct LoopRecord& record, RecordedBlock& block);

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

void attend_block(const LoopInputs& in, const RecordedAttention& recorded, int64_t t, int64_t first, int64_t count,
                  const LoopRecord& record, RecordedBlock& block) {
  if (count == 0) return;
  const int64_t size = in.size(), state_size = in.states.size(2);
  const auto rows = [&](const torch::Tensor& tensor) { return tensor.narrow(0, first, count); };
  block.first = first, block.count = count;
  // Leaves of their own: h_t and W h_t copied (the loop writes on), keys and states detached
  // from the outer graph, whose gradients this function returns itself.
  block.query = rows(record.joined[t]).narrow(1, 0, size).clone().requires_grad_();
  block.keys = rows(in.keys).detach().requires_grad_();
  block.states = rows(in.states).detach().requires_grad_();
  if (record.projected.defined()) block.projected = rows(record.projected[t]).clone().requires_grad_();
  EncodedSource source;
  source.states = block.states, source.keys = block.keys, source.mask = rows(in.mask);
  {
    torch::AutoGradMode recording(true);
    const AttentionResult result =
        recorded.attention->forward(block.query, source, AttentionStep{t, torch::Tensor(), block.projected});
    block.context = result.context, block.weights = result.weights;
  }
  rows(record.attention[t]).copy_(block.weights);
  rows(record.joined[t]).narrow(1, size, state_size).copy_(block.context);
}

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

// The first n rows of a [B, ...] tensor.
torch::Tensor first(const torch::Tensor& tensor, int64_t n) { return tensor.narrow(0, 0, n); }

// Zeroes `count` floats (rows of a record that the loop skips, which the products after it read).
void zero(float* to, int64_t count) { std::fill(to, to + count, 0.0f); }

// One thread's part of the forward loop over every position. At position t only the rows
// [0, active[t]) run; the rest have ended (target padding) and keep 0.
void forward_loop(const LoopInputs& in, const StepProducts& weights, const std::vector<int64_t>& active,
                  const LoopRecord& out, const ForwardScratch& scratch, RecordedAttention& recorded, Team& team) {
  const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.size(), layers = in.layers();
  const int64_t positions = in.keys.size(1), key_size = in.keys.size(2), state_size = in.states.size(2);
  const auto gate_columns = team.share(3 * size, kColumnMultiple);
  const auto query_columns = team.share(in.additive() ? key_size : 0, kColumnMultiple);
  const auto projection_columns = team.share(in.projection.defined() ? in.projection.size(0) : 0, kColumnMultiple);
  const auto hidden_columns = team.share(size, kColumnMultiple);
  const bool* source_mask = in.mask.data_ptr<bool>();
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t n = active[static_cast<size_t>(t)];
    const auto rows = team.rows(0, n), ended = team.rows(n, batch);
    for (int64_t layer = 0; layer < layers; ++layer) {
      const torch::Tensor previous = out.previous(in.initial_hidden, layer, t);  // h^l_{t-1}
      const torch::Tensor output = out.output(layer, t);                         // h^l_t, written here
      const auto l = static_cast<size_t>(layer);
      const torch::Tensor& gi = layer == 0 && t == 0 ? in.gates[0] : scratch.input_gates;
      team.phase([&] {  // the input gates (layer 0: G_t + W_f a_{t-1}; above: W_l x + b_l) and W_h h_{t-1} + b_h
        if (layer > 0) {
          weights.layer_gates[l - 1].multiply(first(out.layer_inputs[layer - 1][t], n), in.layer_bias[l - 1],
                                              first(scratch.input_gates, n), gate_columns);
        } else if (t > 0) {
          weights.feed.multiply(first(out.attentional[t - 1], n), first(in.gates[t], n), first(scratch.input_gates, n),
                                gate_columns);
        }
        weights.hidden[l].multiply(first(previous, n), in.hidden_bias[l], first(scratch.hidden_gates, n), gate_columns);
      });
      team.phase([&] {  // h^l_t (the top layer's into the first H columns of joined[t]); the next layer's input
        for (int64_t b = rows.first; b < rows.second; ++b) {
          float* h = output.data_ptr<float>() + b * output.stride(0);
          kernels::gru_step(
              gi.data_ptr<float>() + b * gi.stride(0), scratch.hidden_gates.data_ptr<float>() + b * 3 * size,
              previous.data_ptr<float>() + b * previous.stride(0), 1, size, h, row(out.gru_saved[layer], t, b));
          if (layer + 1 < layers) {  // dropout between layers
            float* input = row(out.layer_inputs[layer], t, b);
            const float* mask = out.layer_masks.defined() ? row(out.layer_masks[layer], t, b) : nullptr;
            for (int64_t i = 0; i < size; ++i) input[i] = mask != nullptr ? h[i] * mask[i] : h[i];
          }
        }
        for (int64_t b = ended.first; b < ended.second; ++b) {
          zero(output.data_ptr<float>() + b * output.stride(0), layer + 1 < layers ? size : size + state_size);
          if (layer + 1 < layers) zero(row(out.layer_inputs[layer], t, b), size);
        }
      });
    }
    if (in.projection.defined()) {
      team.phase([&] {  // W h_t of a scorer with a query weight
        weights.projection.multiply(first(out.joined[t].narrow(1, 0, size), n), {}, first(out.projected[t], n),
                                    projection_columns);
      });
    }
    if (!in.additive()) {
      team.phase([&] {  // any scorer: w_t and c_t of this thread's rows, recorded
        attend_block(in, recorded, t, rows.first, rows.second - rows.first, out,
                     recorded.steps[static_cast<size_t>(t)][static_cast<size_t>(team.index())]);
      });
    } else {
      team.phase([&] {  // W_q h_t
        weights.query.multiply(first(out.joined[t].narrow(1, 0, size), n), {}, first(scratch.query, n), query_columns);
      });
      team.phase([&] {  // w_t, and c_t into the last C columns of joined[t]
        for (int64_t b = rows.first; b < rows.second; ++b) {
          float* attention_weights = row(out.attention, t, b);
          const float* keys = in.keys.data_ptr<float>() + b * positions * key_size;
          if (in.covered()) {  // K + u cov_t
            float* covered = scratch.covered_keys.data_ptr<float>() + b * positions * key_size;
            const float* coverage = row(out.coverage, t, b);
            const float* u = in.coverage_weight.data_ptr<float>();
            for (int64_t s = 0; s < positions; ++s) {
              for (int64_t a = 0; a < key_size; ++a)
                covered[s * key_size + a] = keys[s * key_size + a] + coverage[s] * u[a];
            }
            keys = covered;
          }
          const int64_t length = real_positions(source_mask + b * positions, positions);
          const float* states = in.states.data_ptr<float>() + b * positions * state_size;
          if (in.heads > 1) {
            float* scores = scratch.head_scores.data_ptr<float>() + b * positions * in.heads;
            kernels::additive_energy(keys, scratch.query.data_ptr<float>() + b * key_size, in.energy.data_ptr<float>(),
                                     1, positions, key_size, in.heads, scores, row(out.activations, t, b));
            heads_forward(scores, length, positions, in.heads, states, state_size, row(out.head_weights, t, b),
                          row(out.joined, t, b) + size, attention_weights);
            continue;
          }
          kernels::additive_energy(keys, scratch.query.data_ptr<float>() + b * key_size, in.energy.data_ptr<float>(), 1,
                                   positions, key_size, /*heads=*/1, attention_weights, row(out.activations, t, b));
          kernels::prefix_softmax(attention_weights, length, positions);
          kernels::weighted_sum(attention_weights, states, 1, positions, state_size, row(out.joined, t, b) + size);
          if (in.covered() && t + 1 < steps) {  // cov_{t+1} = cov_t + w_t
            const float* coverage = row(out.coverage, t, b);
            float* next = row(out.coverage, t + 1, b);
            for (int64_t s = 0; s < positions; ++s) next[s] = coverage[s] + attention_weights[s];
          }
        }
        for (int64_t b = ended.first; b < ended.second; ++b) zero(row(out.activations, t, b), positions * key_size);
      });
    }
    team.phase([&] {  // a_t = dropout(tanh(W_c [h_t; c_t])), this thread's columns
      weights.combine.multiply(first(out.joined[t], n), {}, first(scratch.pre_activation, n), hidden_columns);
      const int64_t column = hidden_columns.first, count = hidden_columns.second - column;
      for (int64_t b = 0; b < n && count > 0; ++b) {
        kernels::attentional_vector(scratch.pre_activation.data_ptr<float>() + b * size + column,
                                    out.masks.defined() ? row(out.masks, t, b) + column : nullptr, count,
                                    row(out.combined, t, b) + column, row(out.attentional, t, b) + column);
      }
    });
  }
}

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

// The backward of a recorded attention step (attend_block): from dL/dc_t (in grad_joined) and
// dL/dw_t (the output's), dL/dh_t into grads.query[t] (and dL/d(W h_t) into grads.projected[t]),
// the block's parts of the states' and keys' gradients added in, and the parameters' gradients
// added to this thread's sums.
void attend_block_backward(const RecordedBlock& block, const RecordedAttention& recorded, int64_t t,
                           const torch::Tensor& grad_joined, const torch::Tensor& grad_attention,
                           const LoopGradients& grads, std::vector<torch::Tensor>& parameter_gradients) {
  if (block.count == 0) return;
  const auto rows = [&](const torch::Tensor& tensor) { return tensor.narrow(0, block.first, block.count); };
  const int64_t size = block.query.size(1);
  const torch::Tensor grad_weights =
      grad_attention.defined() ? rows(grad_attention[t]) : torch::zeros_like(block.weights);
  std::vector<torch::Tensor> inputs = {block.query, block.keys, block.states};
  if (block.projected.defined()) inputs.push_back(block.projected);
  const size_t first_parameter = inputs.size();
  inputs.insert(inputs.end(), recorded.parameters.begin(), recorded.parameters.end());
  // retain_graph: the outer graph may be walked again (backward with retain_graph); the recorded
  // steps go when the function's node does.
  const std::vector<torch::Tensor> gradients = torch::autograd::grad(
      {block.context, block.weights}, inputs, {rows(grad_joined).narrow(1, size, block.states.size(2)), grad_weights},
      /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
  const auto add = [](const torch::Tensor& to, const torch::Tensor& gradient) {
    if (gradient.defined()) to.add_(gradient);
  };
  rows(grads.query[t]).copy_(gradients[0].defined() ? gradients[0] : torch::zeros_like(block.query));
  add(rows(grads.keys), gradients[1]);
  add(rows(grads.states), gradients[2]);
  if (block.projected.defined()) {
    const torch::Tensor& gradient = gradients[3];
    rows(grads.projected[t]).copy_(gradient.defined() ? gradient : torch::zeros_like(block.projected));
  }
  for (size_t i = first_parameter; i < gradients.size(); ++i) {
    torch::Tensor& sum = parameter_gradients[i - first_parameter];
    if (gradients[i].defined()) sum = sum.defined() ? sum.add_(gradients[i]) : gradients[i].clone();
  }
}

// One thread's part of the backward loop over every position, last to first, from dL/da_t
// [T, B, H] and dL/dw_t [T, B, S] (or undefined); only the rows [0, active[t]) at position t.
// dL/dh_t is carried in grads.initial_hidden, which ends as dL/dh_0.
void backward_loop(const LoopInputs& in, const StepProducts& weights, const std::vector<int64_t>& active,
                   const LoopRecord& record, const torch::Tensor& grad_attentional, const torch::Tensor& grad_attention,
                   LoopGradients& grads, const BackwardScratch& scratch, const RecordedAttention& recorded,
                   Team& team) {
  const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.size(), layers = in.layers();
  const int64_t positions = in.keys.size(1), key_size = in.keys.size(2), state_size = in.states.size(2);
  const int64_t query_size = in.query_size();
  const auto hidden_columns = team.share(size, kColumnMultiple);
  const auto joined_columns = team.share(size + state_size, kColumnMultiple);
  const torch::Tensor& carries = grads.initial_hidden;  // [L, B, H] dL/dh^l_t
  const torch::Tensor top_carry = carries[layers - 1];  // the top layer's, which attention reads
  const torch::Tensor& carry_hidden = top_carry;
  team.phase([&] {  // a row's carries start when it does: dL/da from the loss, dL/dh 0
    column_block(scratch.carry_attentional, hidden_columns)
        .copy_(column_block(grad_attentional[steps - 1], hidden_columns));
    column_block(carries, hidden_columns).zero_();
    if (scratch.carry_coverage.defined()) column_block(scratch.carry_coverage, team.share(positions)).zero_();
  });
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t n = active[static_cast<size_t>(t)];
    const auto rows = team.rows(0, n), ended = team.rows(n, batch);
    team.phase([&] {  // dL/d(W_c [h_t; c_t]), this thread's columns
      const int64_t column = hidden_columns.first, count = hidden_columns.second - column;
      for (int64_t b = 0; b < n && count > 0; ++b) {
        kernels::attentional_vector_backward(scratch.carry_attentional.data_ptr<float>() + b * size + column,
                                             row(record.combined, t, b) + column,
                                             record.masks.defined() ? row(record.masks, t, b) + column : nullptr, count,
                                             row(grads.pre_activation, t, b) + column);
      }
    });
    team.phase([&] {  // dL/d[h_t; c_t] through a_t
      weights.combine.multiply(first(grads.pre_activation[t], n), {}, first(scratch.grad_joined, n), joined_columns);
    });
    team.phase([&] {  // attention: dL/dw_t, the energies, W_q h_t; the states' and keys' sums
      if (!in.additive()) {
        const std::vector<RecordedBlock>& blocks = recorded.steps[static_cast<size_t>(t)];
        const auto [begin, end] = team.share(static_cast<int64_t>(blocks.size()));
        for (int64_t k = begin; k < end; ++k) {
          attend_block_backward(blocks[static_cast<size_t>(k)], recorded, t, scratch.grad_joined, grad_attention, grads,
                                grads.parameters[static_cast<size_t>(team.index())]);
        }
        return;
      }
      for (int64_t b = rows.first; b < rows.second; ++b) {
        const float* attention_weights = row(record.attention, t, b);
        float* grad = row(grads.scores, t, b);
        if (in.heads > 1) {  // each head's dL/dw and energies' gradient, then the kernel's backward over all heads
          heads_backward(row(record.head_weights, t, b), in.states.data_ptr<float>() + b * positions * state_size,
                         scratch.grad_joined.data_ptr<float>() + b * (size + state_size) + size,
                         grad_attention.defined() ? row(grad_attention, t, b) : nullptr, positions, in.heads,
                         state_size, scratch.grad_head_weights.data_ptr<float>() + b * positions, grad,
                         grads.states.data_ptr<float>() + b * positions * state_size);
          kernels::additive_energy_backward(row(record.activations, t, b), in.energy.data_ptr<float>(), grad, 1,
                                            positions, key_size, in.heads,
                                            grads.keys.data_ptr<float>() + b * positions * key_size,
                                            row(grads.query, t, b), /*accumulate_keys=*/true);
          continue;
        }
        kernels::weighted_sum_backward(attention_weights, in.states.data_ptr<float>() + b * positions * state_size,
                                       scratch.grad_joined.data_ptr<float>() + b * (size + state_size) + size, 1,
                                       positions, state_size, grad,
                                       grads.states.data_ptr<float>() + b * positions * state_size,
                                       /*accumulate_states=*/true);
        if (grad_attention.defined()) {
          const float* extra = row(grad_attention, t, b);
          for (int64_t s = 0; s < positions; ++s) grad[s] += extra[s];
        }
        float* carry = in.covered() ? scratch.carry_coverage.data_ptr<float>() + b * positions : nullptr;
        if (in.covered()) {  // w_t is in every later coverage: dL/dcov_{t+1}
          for (int64_t s = 0; s < positions; ++s) grad[s] += carry[s];
        }
        softmax_row_backward(attention_weights, grad, positions);  // 0 at padded positions, whose weight is 0
        float* grad_keys = grads.keys.data_ptr<float>() + b * positions * key_size;
        if (!in.covered()) {
          kernels::additive_energy_backward(row(record.activations, t, b), in.energy.data_ptr<float>(), grad, 1,
                                            positions, key_size, /*heads=*/1, grad_keys, row(grads.query, t, b),
                                            /*accumulate_keys=*/true);
          continue;
        }
        // With coverage the kernel's key gradient is dL/d(K + u cov_t): added to K's, and read for
        // dL/du and dL/dcov_t (carried on to t - 1 with the part from t + 1).
        float* step_keys = scratch.grad_keys.data_ptr<float>() + b * positions * key_size;
        kernels::additive_energy_backward(row(record.activations, t, b), in.energy.data_ptr<float>(), grad, 1,
                                          positions, key_size, /*heads=*/1, step_keys, row(grads.query, t, b),
                                          /*accumulate_keys=*/false);
        const float* coverage = row(record.coverage, t, b);
        const float* u = in.coverage_weight.data_ptr<float>();
        float* grad_u = grads.coverage_weight.data_ptr<float>() + b * key_size;
        for (int64_t s = 0; s < positions; ++s) {
          const float* g = step_keys + s * key_size;
          float dot = 0;
          for (int64_t a = 0; a < key_size; ++a) {
            grad_keys[s * key_size + a] += g[a];
            grad_u[a] += coverage[s] * g[a];
            dot += g[a] * u[a];
          }
          carry[s] += dot;
        }
      }
    });
    team.phase([&] {  // dL/dh_t: carried from t + 1, plus the combine layer's and the query's parts
      first(column_block(carry_hidden, hidden_columns), n)
          .add_(first(column_block(scratch.grad_joined, hidden_columns), n));
      if (in.additive()) {
        weights.query.multiply(first(grads.query[t], n), first(carry_hidden, n), first(carry_hidden, n),
                               hidden_columns);
      } else {
        first(column_block(carry_hidden, hidden_columns), n)
            .add_(first(column_block(grads.query[t], hidden_columns), n));
        if (in.projection.defined()) {  // and through W h_t
          weights.projection.multiply(first(grads.projected[t], n), first(carry_hidden, n), first(carry_hidden, n),
                                      hidden_columns);
        }
      }
    });
    for (int64_t layer = layers - 1; layer >= 0; --layer) {  // top to bottom
      const auto l = static_cast<size_t>(layer);
      const torch::Tensor previous = record.previous(in.initial_hidden, layer, t);
      const torch::Tensor carry = carries[layer];
      // dL/d of this layer's input gates: the first layer's are G_t's (and W_f a_{t-1}'s)
      const torch::Tensor input_gates = layer == 0 ? grads.gates[t] : grads.layer_gates[layer - 1][t];
      team.phase([&] {  // the GRU step's backward; ended rows get 0 in what the products after the loop read
        for (int64_t b = rows.first; b < rows.second; ++b) {
          kernels::gru_step_backward(carry.data_ptr<float>() + b * size, row(record.gru_saved[layer], t, b),
                                     previous.data_ptr<float>() + b * previous.stride(0), 1, size,
                                     input_gates.data_ptr<float>() + b * 3 * size, row(grads.hidden_gates[layer], t, b),
                                     scratch.grad_hidden_direct.data_ptr<float>() + b * size);
        }
        for (int64_t b = ended.first; b < ended.second; ++b) {
          zero(input_gates.data_ptr<float>() + b * 3 * size, 3 * size);
          zero(row(grads.hidden_gates[layer], t, b), 3 * size);
          if (layer == layers - 1) {
            zero(row(grads.query, t, b), query_size);
            if (grads.projected.defined()) zero(row(grads.projected, t, b), grads.projected.size(2));
            if (grads.scores.defined()) zero(row(grads.scores, t, b), grads.scores.size(2));
            zero(row(grads.pre_activation, t, b), size);
          }
        }
      });
      team.phase([&] {  // the carries to t - 1 (and to the layer below at t), this thread's columns
        weights.hidden[l].multiply(first(grads.hidden_gates[layer][t], n), first(scratch.grad_hidden_direct, n),
                                   first(carry, n), hidden_columns);
        if (layer > 0) {  // dL/dh^{l-1}_t += mask * W_l^T dL/dgi^l_t
          weights.layer_gates[l - 1].multiply(first(input_gates, n), {}, first(scratch.grad_input, n), hidden_columns);
          const torch::Tensor below = first(column_block(carries[layer - 1], hidden_columns), n);
          const torch::Tensor gradient = first(column_block(scratch.grad_input, hidden_columns), n);
          if (record.layer_masks.defined()) {
            below.addcmul_(gradient, first(column_block(record.layer_masks[layer - 1][t], hidden_columns), n));
          } else {
            below.add_(gradient);
          }
        } else if (t > 0) {  // dL/da_{t-1}: from the loss, and from input feeding into position t
          weights.feed.multiply(first(grads.gates[t], n), first(grad_attentional[t - 1], n),
                                first(scratch.carry_attentional, n), hidden_columns);
          const int64_t rest = batch - n;  // rows that start at t - 1 (or later): the loss's part only
          column_block(scratch.carry_attentional.narrow(0, n, rest), hidden_columns)
              .copy_(column_block(grad_attentional[t - 1].narrow(0, n, rest), hidden_columns));
        }
      });
    }
  }
}

// Per position t, the rows that run: [0, active[t]) holds every row whose target is longer than
// t (with rows in order of decreasing length, as make_batches leaves them, exactly those).
std::vector<int64_t> active_rows(const torch::Tensor& lengths, int64_t steps) {
  std::vector<int64_t> active(static_cast<size_t>(steps), 0);
  const int64_t* length = lengths.data_ptr<int64_t>();
  for (int64_t b = 0; b < lengths.size(0); ++b) {
    for (int64_t t = 0; t < std::min(steps, length[b]); ++t) active[static_cast<size_t>(t)] = b + 1;
  }
  return active;
}

// The lists of per-layer weights travel through the autograd function as one list each; their
// counts are L (hidden, hidden_bias) and L - 1 (layer_gates, layer_bias).
struct DecoderLoop : public torch::autograd::Function<DecoderLoop> {
  // gates [T, B, 3H] contiguous; returns a_t [T, B, H] and w_t [T, B, S]. query_weight and
  // energy_weight (and coverage_weight, heads) are the additive form's, nullopt for any other
  // scorer; `parameters` are then the attention module's, whose gradients come back through this
  // function, and projection its query_weight() (nullopt if it has none).
  static tensor_list forward(AutogradContext* context, const torch::Tensor& gates, const torch::Tensor& initial_hidden,
                             const torch::Tensor& states, const torch::Tensor& keys, const torch::Tensor& mask,
                             const torch::Tensor& feed, at::TensorList hidden, at::TensorList hidden_bias,
                             at::TensorList layer_gates, at::TensorList layer_bias,
                             const c10::optional<torch::Tensor>& query_weight,
                             const c10::optional<torch::Tensor>& energy_weight,
                             const c10::optional<torch::Tensor>& coverage_weight,
                             const c10::optional<torch::Tensor>& projection, const torch::Tensor& combine,
                             at::TensorList parameters, AttentionImpl* attention, const torch::Tensor& lengths,
                             double dropout, int64_t heads) {
    const LoopInputs in{gates,
                        initial_hidden,
                        states,
                        keys,
                        mask,
                        feed,
                        hidden.vec(),
                        hidden_bias.vec(),
                        layer_gates.vec(),
                        layer_bias.vec(),
                        query_weight.value_or(torch::Tensor()),
                        energy_weight.value_or(torch::Tensor()),
                        coverage_weight.value_or(torch::Tensor()),
                        projection.value_or(torch::Tensor()),
                        combine,
                        heads};
    const int64_t steps = gates.size(0), batch = gates.size(1), size = in.size(), layers = in.layers();
    const int64_t positions = keys.size(1), key_size = keys.size(2), state_size = states.size(2);
    const auto options = gates.options();
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
    auto recorded = c10::make_intrusive<RecordedAttention>();
    if (!in.additive()) {
      recorded->attention = attention;
      recorded->parameters = parameters.vec();
      recorded->steps.assign(static_cast<size_t>(steps),
                             std::vector<RecordedBlock>(static_cast<size_t>(std::max(1, at::get_num_threads()))));
      if (in.projection.defined()) record.projected = torch::empty({steps, batch, in.projection.size(0)}, options);
    }
    ForwardScratch scratch(batch, size, key_size, options);
    if (in.covered()) {
      record.coverage = torch::zeros({steps, batch, positions}, options);  // cov_0 = 0
      scratch.covered_keys = torch::empty_like(keys);
    }
    if (heads > 1) {
      record.head_weights = torch::empty({steps, batch, heads, positions}, options);
      scratch.head_scores = torch::empty({batch, positions, heads}, options);
    }
    const StepProducts weights(in, /*forward=*/true);
    const std::vector<int64_t> active = active_rows(lengths, steps);
    run_as_team([&](Team& team) { forward_loop(in, weights, active, record, scratch, *recorded, team); });

    std::vector<torch::Tensor> saved = {gates,
                                        initial_hidden,
                                        states,
                                        keys,
                                        mask,
                                        feed,
                                        in.query,
                                        in.energy,
                                        in.coverage_weight,
                                        in.projection,
                                        combine,
                                        record.attentional,
                                        record.attention,
                                        lengths};
    for (const auto* list : {&in.hidden, &in.hidden_bias, &in.layer_gates, &in.layer_bias}) {
      saved.insert(saved.end(), list->begin(), list->end());
    }
    context->save_for_backward(saved);
    context->saved_data["layers"] = layers;
    context->saved_data["joined"] = record.joined;
    context->saved_data["lower"] = record.lower;
    context->saved_data["layer_inputs"] = record.layer_inputs;
    context->saved_data["gru_saved"] = record.gru_saved;
    if (record.activations.defined()) context->saved_data["activations"] = record.activations;
    if (record.coverage.defined()) context->saved_data["coverage"] = record.coverage;
    if (record.head_weights.defined()) context->saved_data["head_weights"] = record.head_weights;
    context->saved_data["heads"] = heads;
    context->saved_data["combined"] = record.combined;
    if (record.masks.defined()) context->saved_data["masks"] = record.masks;
    if (record.layer_masks.defined()) context->saved_data["layer_masks"] = record.layer_masks;
    context->saved_data["parameters"] = static_cast<int64_t>(parameters.size());
    context->saved_data["recorded"] = c10::IValue::make_capsule(recorded);
    return {record.attentional, record.attention};
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    TORCH_CHECK(!torch::GradMode::is_enabled(), "fused decoder loop: no second derivatives (create_graph)");
    const auto saved = context->get_saved_variables();
    const int64_t layers = context->saved_data["layers"].toInt();
    const auto per_layer = [&](int64_t begin, int64_t count) {
      return std::vector<torch::Tensor>(saved.begin() + begin, saved.begin() + begin + count);
    };
    const LoopInputs in{saved[0],
                        saved[1],
                        saved[2],
                        saved[3],
                        saved[4],
                        saved[5],
                        per_layer(14, layers),
                        per_layer(14 + layers, layers),
                        per_layer(14 + 2 * layers, layers - 1),
                        per_layer(13 + 3 * layers, layers - 1),
                        saved[6],
                        saved[7],
                        saved[8],
                        saved[9],
                        saved[10],
                        context->saved_data["heads"].toInt()};
    LoopRecord record;
    record.attentional = saved[11];
    record.attention = saved[12];
    const std::vector<int64_t> active = active_rows(saved[13], in.gates.size(0));
    const auto saved_tensor = [&](const char* name) {
      return context->saved_data.count(name) != 0 ? context->saved_data[name].toTensor() : torch::Tensor();
    };
    record.hidden_size = in.size();
    record.joined = saved_tensor("joined");
    record.lower = saved_tensor("lower");
    record.layer_inputs = saved_tensor("layer_inputs");
    record.gru_saved = saved_tensor("gru_saved");
    record.activations = saved_tensor("activations");
    record.coverage = saved_tensor("coverage");
    record.head_weights = saved_tensor("head_weights");
    record.combined = saved_tensor("combined");
    record.masks = saved_tensor("masks");
    record.layer_masks = saved_tensor("layer_masks");
    const auto parameter_count = static_cast<size_t>(context->saved_data["parameters"].toInt());
    const auto recorded =
        c10::static_intrusive_pointer_cast<RecordedAttention>(context->saved_data["recorded"].toCapsule());

    const int64_t steps = in.gates.size(0), batch = in.gates.size(1), size = in.size();
    const auto options = in.gates.options();
    const torch::Tensor grad_attentional =
        gradients[0].defined() ? gradients[0].contiguous() : torch::zeros_like(record.attentional);
    const torch::Tensor grad_attention = gradients[1].defined() ? gradients[1].contiguous() : torch::Tensor();
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
    BackwardScratch scratch(batch, size, in.states.size(2), options);
    if (in.covered()) {
      scratch.carry_coverage = torch::empty({batch, in.keys.size(1)}, options);
      scratch.grad_keys = torch::empty_like(in.keys);
      grads.coverage_weight = torch::zeros({batch, in.keys.size(2)}, options);
    }
    if (in.heads > 1) scratch.grad_head_weights = torch::empty({batch, in.keys.size(1)}, options);
    const StepProducts weights(in, /*forward=*/false);
    run_as_team([&](Team& team) {
      backward_loop(in, weights, active, record, grad_attentional, grad_attention, grads, scratch, *recorded, team);
    });

    // Weight gradients: one product each over all positions.
    const auto rows = [](const torch::Tensor& tensor) { return tensor.flatten(0, 1); };  // [T, B, n] -> [T * B, n]
    const auto outputs = [&](int64_t layer) {                                            // h^l_1 .. h^l_T [T, B, H]
      return layer == layers - 1 ? record.joined.narrow(2, 0, size) : record.lower[layer];
    };
    tensor_list result = {grads.gates, grads.initial_hidden, grads.states, grads.keys, torch::Tensor()};
    torch::Tensor grad_feed = torch::zeros_like(in.feed);  // a_0 = 0 feeds nothing
    if (steps > 1) {
      grad_feed.addmm_(rows(grads.gates.narrow(0, 1, steps - 1)).t(), rows(record.attentional.narrow(0, 0, steps - 1)));
    }
    result.push_back(grad_feed);
    std::vector<torch::Tensor> grad_hidden_bias, grad_layer_gates, grad_layer_bias;
    for (int64_t layer = 0; layer < layers; ++layer) {  // W_h: h^l_0 feeds position 0, h^l_{t-1} position t
      const torch::Tensor hidden_gates = grads.hidden_gates[layer];
      torch::Tensor grad_hidden = hidden_gates[0].t().mm(in.initial_hidden[layer]);
      if (steps > 1) {
        grad_hidden.addmm_(rows(hidden_gates.narrow(0, 1, steps - 1)).t(),
                           rows(outputs(layer).narrow(0, 0, steps - 1)));
      }
      result.push_back(grad_hidden);
      grad_hidden_bias.push_back(rows(hidden_gates).sum(0));
      if (layer > 0) {  // W_l, b_l: the layer's input x^l_t at every position
        const torch::Tensor input_gates = grads.layer_gates[layer - 1];
        grad_layer_gates.push_back(rows(input_gates).t().mm(rows(record.layer_inputs[layer - 1])));
        grad_layer_bias.push_back(rows(input_gates).sum(0));
      }
    }
    for (const auto* list : {&grad_hidden_bias, &grad_layer_gates, &grad_layer_bias}) {
      result.insert(result.end(), list->begin(), list->end());
    }
    if (in.additive()) {
      result.push_back(rows(grads.query).t().mm(rows(outputs(layers - 1))));
      // v: head n's slice of A from the activations of that slice and head n's energy gradients
      const int64_t key_size = in.keys.size(2), slice = key_size / in.heads;
      const torch::Tensor activations = record.activations.view({-1, key_size});  // [T B S, A]
      const torch::Tensor scores = grads.scores.view({-1, in.heads});             // [T B S, N]
      torch::Tensor grad_energy = torch::empty({key_size}, options);
      for (int64_t n = 0; n < in.heads; ++n) {
        grad_energy.narrow(0, n * slice, slice)
            .copy_(activations.narrow(1, n * slice, slice).t().mv(scores.select(1, n)));
      }
      result.push_back(grad_energy);
      result.push_back(in.covered() ? grads.coverage_weight.sum(0) : torch::Tensor());  // u: the rows' sums
    } else {
      result.insert(result.end(), {torch::Tensor(), torch::Tensor(), torch::Tensor()});
    }
    // W of a scorer's query map: one product over all positions, as W_q's
    result.push_back(in.projection.defined() ? rows(grads.projected).t().mm(rows(outputs(layers - 1)))
                                             : torch::Tensor());
    result.push_back(rows(grads.pre_activation).t().mm(rows(record.joined)));  // W_c
    for (size_t i = 0; i < parameter_count; ++i) {                             // the threads' sums
      torch::Tensor sum;
      for (const auto& thread : grads.parameters) {
        if (thread[i].defined()) sum = sum.defined() ? sum.add_(thread[i]) : thread[i];
      }
      result.push_back(sum);
    }
    // attention, lengths, dropout, heads
    result.insert(result.end(), {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()});
    return result;
  }
};

}  // namespace

FusedDecoderOutput fused_decoder_loop(const torch::Tensor& token_gates, const torch::Tensor& initial_hidden,
                                      const EncodedSource& source, const FusedDecoderWeights& weights,
                                      AttentionImpl& attention, const torch::Tensor& target_lengths, double dropout) {
  const auto layers = static_cast<int64_t>(weights.hidden.size());
  TORCH_CHECK(layers >= 1 && initial_hidden.dim() == 3 && initial_hidden.size(0) == layers &&
                  static_cast<int64_t>(weights.hidden_bias.size()) == layers &&
                  static_cast<int64_t>(weights.layer_gates.size()) == layers - 1 &&
                  static_cast<int64_t>(weights.layer_bias.size()) == layers - 1,
              "fused decoder loop: initial_hidden [L, B, H], L hidden weights and biases, L - 1 layer input weights "
              "and biases expected");
  const int64_t size = initial_hidden.size(2);
  TORCH_CHECK(target_lengths.dim() == 1 && target_lengths.size(0) == token_gates.size(0) &&
                  target_lengths.scalar_type() == torch::kLong,
              "fused decoder loop: target_lengths [B] int64 expected");
  TORCH_CHECK(token_gates.dim() == 3 && token_gates.size(0) == initial_hidden.size(1) &&
                  token_gates.size(2) == 3 * size && token_gates.size(1) > 0,
              "fused decoder loop: token_gates [B, T, 3H] (T > 0) and initial_hidden [L, B, H] expected");
  const int64_t batch = initial_hidden.size(1);
  TORCH_CHECK(source.states.dim() == 3 && source.keys.dim() == 3 && source.states.size(0) == batch &&
                  source.keys.size(0) == batch && source.keys.size(1) == source.states.size(1) &&
                  source.mask.sizes() == torch::IntArrayRef({batch, source.states.size(1)}) &&
                  source.mask.scalar_type() == torch::kBool,
              "fused decoder loop: encoder states [B, S, C], keys [B, S, A] and a bool mask [B, S] expected");
  const int64_t key_size = source.keys.size(2);
  for (int64_t layer = 0; layer < layers; ++layer) {
    const auto l = static_cast<size_t>(layer);
    TORCH_CHECK(weights.hidden[l].sizes() == torch::IntArrayRef({3 * size, size}) &&
                    weights.hidden_bias[l].sizes() == torch::IntArrayRef({3 * size}) &&
                    (layer == 0 || (weights.layer_gates[l - 1].sizes() == torch::IntArrayRef({3 * size, size}) &&
                                    weights.layer_bias[l - 1].sizes() == torch::IntArrayRef({3 * size}))),
                "fused decoder loop: layer weights W_h, W_l [3H, H] and biases b_h, b_l [3H] expected");
  }
  TORCH_CHECK(weights.feed.sizes() == torch::IntArrayRef({3 * size, size}) &&
                  weights.query.defined() == weights.energy.defined() &&
                  (!weights.query.defined() || (weights.query.sizes() == torch::IntArrayRef({key_size, size}) &&
                                                weights.energy.sizes() == torch::IntArrayRef({key_size}))) &&
                  (!weights.coverage.defined() ||
                   (weights.query.defined() && weights.coverage.sizes() == torch::IntArrayRef({key_size}))) &&
                  weights.combine.sizes() == torch::IntArrayRef({size, size + source.states.size(2)}),
              "fused decoder loop: weights of shapes W_f [3H, H], W_q [A, H], v [A], u [A], W_c [H, H + C] expected");
  TORCH_CHECK(!attention.uses_coverage() || weights.coverage.defined(),
              "fused decoder loop: coverage is carried for the additive form only (FusedDecoderWeights::coverage)");
  TORCH_CHECK(weights.heads == 1 || (weights.heads > 1 && weights.query.defined() && !weights.coverage.defined() &&
                                     key_size % weights.heads == 0 && source.states.size(2) % weights.heads == 0),
              "fused decoder loop: heads > 1 only for the additive form without coverage, dividing A and C");
  const bool additive = weights.query.defined();
  const auto contiguous = [](const torch::Tensor& tensor) {  // undefined: no input (the function sees nullopt)
    return tensor.defined() ? c10::optional<torch::Tensor>(tensor.contiguous()) : c10::nullopt;
  };
  const std::vector<torch::Tensor> parameters = additive ? std::vector<torch::Tensor>() : attention.parameters();
  const auto all_contiguous = [](const std::vector<torch::Tensor>& tensors) {
    std::vector<torch::Tensor> result;
    for (const torch::Tensor& tensor : tensors) result.push_back(tensor.contiguous());
    return result;
  };
  const std::vector<torch::Tensor> hidden = all_contiguous(weights.hidden);
  const std::vector<torch::Tensor> hidden_bias = all_contiguous(weights.hidden_bias);
  const std::vector<torch::Tensor> layer_gates = all_contiguous(weights.layer_gates);
  const std::vector<torch::Tensor> layer_bias = all_contiguous(weights.layer_bias);
  tensor_list outputs = DecoderLoop::apply(
      token_gates.transpose(0, 1).contiguous(), initial_hidden.contiguous(), source.states.contiguous(),
      source.keys.contiguous(), source.mask.contiguous(), weights.feed.contiguous(), at::TensorList(hidden),
      at::TensorList(hidden_bias), at::TensorList(layer_gates), at::TensorList(layer_bias), contiguous(weights.query),
      contiguous(weights.energy), contiguous(weights.coverage),
      contiguous(additive ? torch::Tensor() : attention.query_weight()), weights.combine.contiguous(),
      at::TensorList(parameters), &attention, target_lengths.cpu().contiguous(), dropout, weights.heads);
  return {outputs[0].transpose(0, 1), outputs[1].transpose(0, 1)};
}

}  // namespace nmt
