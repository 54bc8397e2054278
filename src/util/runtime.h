// Process-wide run settings: threads, seeds, the device, and a check of LibTorch's BLAS.
#pragma once

#include <torch/types.h>

#include <string>

namespace nmt {

// Sets LibTorch's intra-op threads; 0 means the number of cores.
void set_threads(int threads);

// Seeds LibTorch's generators (CPU and CUDA).
void set_seed(int seed);

// "cpu" or "cuda"; throws std::invalid_argument when CUDA is asked for but unavailable.
torch::Device parse_device(const std::string& name);

// A warning text when the BLAS that LibTorch calls is the slow reference BLAS, else empty.
std::string slow_blas_warning();

}  // namespace nmt
