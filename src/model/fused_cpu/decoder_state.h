// The state that the fused decoder loop's forward hands its backward (fused_cpu/decoder_pass.h), as one
// typed struct, and the one place that puts it into autograd's context and takes it back out.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <vector>

#include "model/fused_cpu/decoder_loop.h"
#include "model/fused_cpu/decoder_recorded.h"

namespace nmt::fused_decoder {

struct LoopState {
  LoopInputs in;                // the function's inputs
  std::vector<int64_t> active;  // per position t, the rows that run: [0, active[t])
  LoopRecord record;            // what the forward loop wrote, its outputs a_t and w_t included
  RecordedAttention recorded;   // the recorded attention steps of any scorer but the additive form
};

// Keeps the state in the context for the backward; call once, at the end of the forward.
void save_state(torch::autograd::AutogradContext* context, const LoopState& state);

// The state save_state kept.
LoopState restore_state(torch::autograd::AutogradContext* context);

}  // namespace nmt::fused_decoder
