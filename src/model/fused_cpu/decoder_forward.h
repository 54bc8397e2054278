// The fused decoder loop's forward pass (fused_cpu/decoder_pass.h has the maths): a_t and w_t for every
// target position, and what the backward needs of them.
#pragma once

#include "model/fused_cpu/decoder_state.h"

namespace nmt::fused_decoder {

// Runs the forward loop over every position on state.in and state.active (and, for any scorer
// but the additive form, state.recorded's attention module and parameters); fills state.record,
// its outputs a_t [T, B, H] and w_t [T, B, S] included, and state.recorded's steps. dropout: the
// probability for a_t and between layers, 0 when not training.
void forward_pass(LoopState& state, double dropout);

}  // namespace nmt::fused_decoder
