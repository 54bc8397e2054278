// The decoder's reference training pass: the step the model is written as (DecoderImpl::advance,
// model/decoder.cpp) once per target position, each operation recorded by autograd. The other
// passes (model/fused_cpu/, model/gpu_graph/) compute the same function faster for the decoders
// they take, and are tested against this one; every other decoder, and scheduled feeding, runs
// here. DecoderImpl::forward chooses the pass (DecoderImpl::teacher_forced_path).
//
// Shapes: B batch, T target positions, H decoder hidden size, V target vocabulary.
#pragma once

#include <torch/types.h>

#include <functional>
#include <utility>

#include "model/decoder.h"

namespace nmt::reference {

// One step of the decoder from the first layer's input gates [B, 3H] computed from y_{t-1}:
// advances `state` and returns a_t [B, H] and the attention weights (undefined for attention none).
using DecoderStep = std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor&, DecoderState&)>;

// Teacher forcing: `token_gates` [B, T, 3H] are the input gates of every input token, computed in
// one product; the steps run in order from `state`.
DecoderOutput teacher_forced_steps(const torch::Tensor& token_gates, DecoderState state, const DecoderStep& step,
                                   bool has_scorer);

// Scheduled feeding (training with teacher_forcing < 1): per step after the first, the reference
// token of `target_input` [B, T] with probability teacher_forcing (one draw of torch::rand per
// step), else the argmax of `logits` (a_{t-1} [B, H] -> [B, V]) of the previous step, computed
// without gradients; `token_gates` maps tokens [B] to their input gates [B, 3H].
DecoderOutput scheduled_feeding_steps(const torch::Tensor& target_input, DecoderState state, double teacher_forcing,
                                      const std::function<torch::Tensor(const torch::Tensor&)>& token_gates,
                                      const std::function<torch::Tensor(const torch::Tensor&)>& logits,
                                      const DecoderStep& step, bool has_scorer);

}  // namespace nmt::reference
