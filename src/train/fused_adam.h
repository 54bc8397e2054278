// torch::optim::Adam with its update done by one kernel pass per parameter (kernels/adam_kernel.h)
// instead of eight LibTorch passes, and on a GPU by LibTorch's fused multi-tensor kernel. Same state
// (AdamParamState, under the same keys), so train/optimizer_state.h saves and loads either. Parameters neither kernel
// handles (the CPU kernels off or absent (kernels/dispatch.h), other types, weight decay or amsgrad) take Adam's own
// step, the reference.
#pragma once

#include <torch/optim/adam.h>

#include <type_traits>
#include <utility>

namespace nmt {

// LibTorch keys an optimizer's state by its parameter's TensorImpl: the pointer as text ("0x...")
// in LibTorch 1.13, the pointer itself in 2.x.
using AdamStateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
AdamStateKey adam_state_key(const torch::Tensor& param);

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  bool fits_kernel(const torch::Tensor& param) const;
  torch::optim::AdamParamState& state_of(const torch::Tensor& param);
  // On a GPU (float32, no weight decay or amsgrad): LibTorch's fused multi-tensor Adam, what
  // torch.optim.Adam(fused=True) runs, one launch for all parameters instead of about eight per
  // parameter. False, with nothing done, for anything else.
  bool step_on_gpu();
};

}  // namespace nmt
