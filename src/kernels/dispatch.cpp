#include "kernels/dispatch.h"

#include <torch/torch.h>

#include "kernels/available.h"

namespace nmt::kernels {

bool kernels_take(TensorRefs tensors) {
  if (!avx2_kernels_available()) return false;
  for (const torch::Tensor& tensor : tensors) {
    if (tensor.defined() && (!tensor.device().is_cpu() || tensor.scalar_type() != torch::kFloat)) return false;
  }
  return true;
}

bool autograd_records(TensorRefs tensors) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor& tensor : tensors) {
    if (tensor.defined() && tensor.requires_grad()) return true;
  }
  return false;
}

}  // namespace nmt::kernels
