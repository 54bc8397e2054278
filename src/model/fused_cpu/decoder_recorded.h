// The attention step of any scorer but the additive form inside the fused decoder loop
// (fused_cpu/decoder_pass.h): AttentionImpl::forward, run by each thread on its block of rows with
// autograd recording just that step, and its backward block by block (torch::autograd::grad).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "model/attention.h"
#include "model/fused_cpu/decoder_loop.h"

namespace nmt::fused_decoder {

// One thread's block of rows at one position, with autograd's record of its attention step
// (the step of any scorer but the additive form).
struct RecordedBlock {
  int64_t first = 0, count = 0;                  // rows [first, first + count)
  torch::Tensor query, projected, keys, states;  // the block's inputs, leaves: [n, H], [n, P], [n, S, K],
                                                 // [n, S, C]
  torch::Tensor context, weights;                // AttentionImpl::forward's outputs [n, C], [n, S]
};

// The attention steps the forward loop recorded, kept for the backward (in the loop's state,
// fused_cpu/decoder_state.h).
struct RecordedAttention {
  AttentionImpl* attention = nullptr;
  std::vector<torch::Tensor> parameters;          // the attention module's
  std::vector<std::vector<RecordedBlock>> steps;  // [T][thread]
};

// The attention step of rows [first, first + count) at position t: AttentionImpl::forward on
// leaves holding the block's h_t (and W h_t), keys and states, recorded by autograd; writes w_t
// into record.attention and c_t into record.joined.
void attend_block(const LoopInputs& in, const RecordedAttention& recorded, int64_t t, int64_t first, int64_t count,
                  const LoopRecord& record, RecordedBlock& block);

// The backward of a recorded attention step (attend_block): from dL/dc_t (in grad_joined) and
// dL/dw_t (the output's), dL/dh_t into grads.query[t] (and dL/d(W h_t) into grads.projected[t]),
// the block's parts of the states' and keys' gradients added in, and the parameters' gradients
// added to this thread's sums.
void attend_block_backward(const RecordedBlock& block, const RecordedAttention& recorded, int64_t t,
                           const torch::Tensor& grad_joined, const torch::Tensor& grad_attention,
                           const LoopGradients& grads, std::vector<torch::Tensor>& parameter_gradients);

}  // namespace nmt::fused_decoder
