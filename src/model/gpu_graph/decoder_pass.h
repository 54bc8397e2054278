// The decoder's teacher-forced training pass on a GPU (decoder.h), as one autograd function whose
// forward and backward are loops of LibTorch operations written out step by step, each step
// recorded once as a CUDA graph (util/cuda_graph.h) and replayed as one launch. The maths is
// DecoderImpl::advance for the recipe's decoder: one layer, the additive scorer with one head and
// no coverage. Per target position t:
//   gi_t = G_t + W_f a_{t-1}       G_t: input gates from y_{t-1} (all positions, one product)
//   h_t  = GRU(gi_t, W_h h_{t-1} + b_h, h_{t-1})
//   u_t  = tanh(K + W_q h_t)  [B, S, A]           K: the keys
//   w_t  = masked softmax(u_t v),  c_t = sum_s w_ts states_s
//   a_t  = m_t * tanh(W_c [h_t; c_t])             m_t: the dropout mask
// and backward, from the last position to the first, the gradients of the recurrence; each
// weight's gradient is then one product over all positions.
//
// Why: the per-step path is a few dozen LibTorch calls per position, forward and backward, each
// a small kernel, and at the recipe's batch the host's dispatching of them, not the GPU, sets the
// pace. A graph replays its kernels on the memory it was recorded with, so every tensor a step
// reads or writes lives in buffers that keep their addresses from batch to batch, and the position
// t is a counter on the GPU that the step reads (index_select, index_copy_) and advances. One graph
// serves every position of a (batch size, source length): the first position of a new shape runs
// as it is, the second records, the rest replay.
//
// The same code runs on the CPU without graphs, where the tests hold it against the per-step
// path. Every position runs for every row: those past a row's target are padding, which no loss
// reads.
//
// Shapes: B batch, T target positions, S source length, H hidden size, A attention size, C encoder
// state size.
#pragma once

#include <torch/types.h>

#include <memory>
#include <utility>

#include "model/encoded_source.h"

namespace nmt {

struct GpuLoopWeights {
  torch::Tensor feed;         // [3H, H] W_f
  torch::Tensor hidden;       // [3H, H] W_h
  torch::Tensor hidden_bias;  // [3H] b_h
  torch::Tensor query;        // [A, H] W_q
  torch::Tensor energy;       // [A] v
  torch::Tensor combine;      // [H, H + C] W_c
};

namespace gpu_decoder {
struct Arena;
}

// The loop with its buffers and graphs; one per decoder. A forward's records stay in the buffers
// until its backward: the next forward of the same loop overwrites them (its backward then fails
// with a message).
class GpuDecoderLoop {
 public:
  GpuDecoderLoop();
  ~GpuDecoderLoop();

  // token_gates [B, T, 3H], initial_hidden [B, H], float32 on one device, with the source's
  // states, keys and mask. dropout: the probability for a_t, 0 when not training. Returns a_t
  // [B, T, H] and w_t [B, T, S], differentiable with respect to every input and weight.
  std::pair<torch::Tensor, torch::Tensor> run(const torch::Tensor& token_gates, const torch::Tensor& initial_hidden,
                                              const EncodedSource& source, const GpuLoopWeights& weights,
                                              double dropout);

 private:
  std::shared_ptr<gpu_decoder::Arena> arena_;
};

// Where DecoderImpl::forward takes the loop while training: on GPUs (the default), or on every
// device for one scope (the tests, which run it on the CPU).
class ScopedGpuLoopEverywhere {
 public:
  ScopedGpuLoopEverywhere();
  ~ScopedGpuLoopEverywhere();
  ScopedGpuLoopEverywhere(const ScopedGpuLoopEverywhere&) = delete;
  ScopedGpuLoopEverywhere& operator=(const ScopedGpuLoopEverywhere&) = delete;

 private:
  bool previous_;
};

// Whether a training pass on tensors of `device` takes the loop (a GPU, or any device in a
// ScopedGpuLoopEverywhere).
bool gpu_loop_device(const torch::Device& device);

}  // namespace nmt
