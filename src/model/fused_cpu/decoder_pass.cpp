// The fused decoder loop as one autograd function (fused_cpu/decoder_pass.h): the checks of its inputs, and
// the glue that hands them to the forward pass (fused_cpu/decoder_forward.h), keeps the state the
// backward needs (fused_cpu/decoder_state.h) and returns the backward pass's gradients
// (fused_cpu/decoder_backward.h) in the order of the function's inputs.
#include "model/fused_cpu/decoder_pass.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "model/fused_cpu/decoder_backward.h"
#include "model/fused_cpu/decoder_forward.h"
#include "model/fused_cpu/decoder_state.h"

namespace nmt {
namespace {

using fused_decoder::InputGradients;
using fused_decoder::LoopInputs;
using fused_decoder::LoopState;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

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
    LoopState state;
    state.in = LoopInputs{gates,
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
    state.active = active_rows(lengths, gates.size(0));
    if (!state.in.additive()) state.recorded.attention = attention;
    state.recorded.parameters = parameters.vec();  // none for the additive form
    fused_decoder::forward_pass(state, dropout);
    fused_decoder::save_state(context, state);
    return {state.record.attentional, state.record.attention};
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    TORCH_CHECK(!torch::GradMode::is_enabled(), "fused decoder loop: no second derivatives (create_graph)");
    const LoopState state = fused_decoder::restore_state(context);
    const InputGradients grads = fused_decoder::backward_pass(state, gradients[0], gradients[1]);
    tensor_list result = {grads.gates, grads.initial_hidden,     grads.states,
                          grads.keys,  /*mask=*/torch::Tensor(), grads.feed};
    for (const auto* list : {&grads.hidden, &grads.hidden_bias, &grads.layer_gates, &grads.layer_bias}) {
      result.insert(result.end(), list->begin(), list->end());
    }
    result.insert(result.end(), {grads.query, grads.energy, grads.coverage_weight, grads.projection, grads.combine});
    result.insert(result.end(), grads.parameters.begin(), grads.parameters.end());
    // attention, lengths, dropout, heads
    result.insert(result.end(), {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()});
    return result;
  }
};

// The shapes of fused_decoder_loop's inputs but the weights (fused_cpu/decoder_pass.h).
void check_inputs(const torch::Tensor& token_gates, const torch::Tensor& initial_hidden, const EncodedSource& source,
                  const FusedDecoderWeights& weights, const torch::Tensor& target_lengths) {
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
}

// The shapes of its weights, given inputs that check_inputs passed.
void check_weights(const torch::Tensor& initial_hidden, const EncodedSource& source, const FusedDecoderWeights& weights,
                   const AttentionImpl& attention) {
  const auto layers = static_cast<int64_t>(weights.hidden.size());
  const int64_t size = initial_hidden.size(2), key_size = source.keys.size(2);
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
}

// The tensors of a list, each contiguous.
std::vector<torch::Tensor> all_contiguous(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> result;
  for (const torch::Tensor& tensor : tensors) result.push_back(tensor.contiguous());
  return result;
}

}  // namespace

FusedDecoderOutput fused_decoder_loop(const torch::Tensor& token_gates, const torch::Tensor& initial_hidden,
                                      const EncodedSource& source, const FusedDecoderWeights& weights,
                                      AttentionImpl& attention, const torch::Tensor& target_lengths, double dropout) {
  check_inputs(token_gates, initial_hidden, source, weights, target_lengths);
  check_weights(initial_hidden, source, weights, attention);
  const bool additive = weights.query.defined();
  const auto contiguous = [](const torch::Tensor& tensor) {  // undefined: no input (the function sees nullopt)
    return tensor.defined() ? c10::optional<torch::Tensor>(tensor.contiguous()) : c10::nullopt;
  };
  const std::vector<torch::Tensor> parameters = additive ? std::vector<torch::Tensor>() : attention.parameters();
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
