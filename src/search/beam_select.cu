// The GPU's side of beam_select.h: one step's selection as one kernel, a thread per sentence.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "search/beam_select.h"

namespace nmt {

namespace {

__global__ void select_beams_kernel(BeamStep step) {
  const int64_t b = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (b < step.sentences) select_sentence(step, b);
}

}  // namespace

void select_beams_on_gpu(const BeamStep& step, void* stream) {
  constexpr unsigned kThreads = 128;
  const auto blocks = static_cast<unsigned>((step.sentences + kThreads - 1) / kThreads);
  select_beams_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(step);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) {
    throw std::runtime_error(std::string("beam search: the selection kernel did not start (") +
                             cudaGetErrorString(error) + ")");
  }
}

}  // namespace nmt
