// torch::optim::Adam with its update done by one kernel pass per parameter (kernels/adam_kernel.h)
// instead of eight LibTorch passes. Same state (AdamParamState, under the same keys), so it saves
// and loads exactly as Adam does and checkpoints move between the two. Parameters the kernel does
// not handle (not float32 on the CPU, the kernels off or absent (kernels/dispatch.h), weight decay
// or amsgrad) take Adam's own step, the reference.
#pragma once

#include <torch/optim/adam.h>

namespace nmt {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  bool fits_kernel(const torch::Tensor& param) const;
};

}  // namespace nmt
