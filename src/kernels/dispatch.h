// The LibTorch side of the kernels (the kernels themselves are pure C++): which tensors they take,
// and whether autograd needs the function that wraps them, in one place for every caller.
#pragma once

#include <torch/types.h>

#include <functional>
#include <initializer_list>

namespace nmt::kernels {

using TensorRefs = std::initializer_list<std::reference_wrapper<const torch::Tensor>>;

// True when this CPU runs the kernels (avx2_kernels_available()) and every defined tensor given is
// float32 on the CPU; undefined tensors (an absent bias) are skipped. Otherwise callers run the
// LibTorch expressions the kernels replace.
bool kernels_take(TensorRefs tensors);

// True when autograd records an operation on these inputs: grad mode is on and one of them
// requires grad. Otherwise a kernel's forward can run alone, keeping nothing for a backward.
bool autograd_records(TensorRefs tensors);

}  // namespace nmt::kernels
