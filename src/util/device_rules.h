// What runs where: every choice the toolkit makes by the kind of device is a question answered
// here, so that the model, search, training, inference and server code ask what a device does
// (and the answer says why it matters) instead of testing which device it is. To run a path on a
// new kind of device, or to move one from the CPU to the GPU, change the answer here.
//
// The other three places that name a device type: kernels/dispatch.h, the CPU kernels' front (by
// instruction set, and which tensors they take); util/runtime.h, the mechanics (moving tensors,
// autocast, random states, reading back without waiting); util/cuda_graph.h, GPU streams and
// CUDA graphs.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <string>

namespace nmt {

// Whether `device` queues its work and runs it later (a GPU). There a value read back on the host
// waits for all the work queued before it, and each operation costs a launch whatever its size,
// so the code for it keeps shapes fixed (the search's fixed-shape loops, the recorded training
// passes), reads back no value it can do without (the loss keeps padding rather than count it out)
// and prefers one large operation to several small ones. On the CPU an operation has finished
// when its call returns, and skipping work pays.
bool queues_work(const torch::Device& device);

// How many batches to decode at once on `device`, each on a thread of its own: on the CPU up to
// `threads` (small batches side by side keep more cores busy than one batch's operators split
// across them); on a GPU one, which runs each operation across the whole batch already.
size_t batch_workers(const torch::Device& device, size_t threads);

// Whether LibTorch's fused kernels for recurrent layers run on `device`: cuDNN's GRU layer and the
// fused GRU cell (at::_thnn_fused_gru_cell) with its backward, on GPUs. The CPU runs our kernels
// (kernels/dispatch.h) or the same maths in LibTorch's plain operations.
bool has_library_gru_kernels(const torch::Device& device);

// Whether LibTorch's fused Adam (at::_fused_adam_, one launch per step for all parameters) runs on
// `device`: GPUs. The CPU runs FusedAdam's kernel or torch::optim::Adam.
bool has_library_fused_adam(const torch::Device& device);

// The c10d backend that sums gradients between data-parallel ranks on `device`: "nccl" between
// GPUs, "gloo" between CPUs.
std::string collective_backend(const torch::Device& device);

// Whether `device` has a random-number generator of its own beside the CPU's (a GPU): dropout on
// it draws from that one, so a checkpoint keeps its state as well.
bool has_own_generator(const torch::Device& device);

// Throws std::invalid_argument saying what to use instead unless training in bf16 runs on
// `device`: a CPU with bfloat16 dot products (AVX512_BF16 or AMX), or a GPU of compute capability
// 8.0 or later. On the CPU the products in bf16 are oneDNN's and our kernels'
// (model/linear/bf16_products.h); on a GPU, LibTorch's autocast (util/runtime.h). On the CPU it
// also turns off oneDNN's tracing marks.
void check_bf16_training(const torch::Device& device);

}  // namespace nmt
