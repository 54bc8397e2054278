// The fused decoder loop's backward pass (fused_cpu/decoder_pass.h has the maths): the gradients of the
// function's inputs from those of its outputs a_t and w_t.
#pragma once

#include <torch/types.h>

#include <vector>

#include "model/fused_cpu/decoder_state.h"

namespace nmt::fused_decoder {

// dL/d each of the function's inputs (LoopInputs' fields, and the attention module's parameters
// for any scorer but the additive form); undefined where an input is absent or gets none.
struct InputGradients {
  torch::Tensor gates, initial_hidden, states, keys;   // [T, B, 3H], [L, B, H], [B, S, C], [B, S, A]
  torch::Tensor feed;                                  // W_f
  std::vector<torch::Tensor> hidden, hidden_bias;      // L: W_h, b_h
  std::vector<torch::Tensor> layer_gates, layer_bias;  // L - 1: W_l, b_l
  torch::Tensor query, energy, coverage_weight;        // W_q, v, u of the additive form
  torch::Tensor projection;                            // W of any other scorer's query map
  torch::Tensor combine;                               // W_c
  std::vector<torch::Tensor> parameters;               // RecordedAttention::parameters'
};

// Runs the backward loop over every position, last to first, from dL/da_t [T, B, H] and dL/dw_t
// [T, B, S] (either undefined: none), then each weight's gradient as one product over all
// positions.
InputGradients backward_pass(const LoopState& state, const torch::Tensor& grad_attentional,
                             const torch::Tensor& grad_attention);

}  // namespace nmt::fused_decoder
