#include "kernels/dispatch.h"

#include <torch/torch.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "kernels/available.h"

namespace nmt::kernels {
namespace {

KernelLevel level_from_environment() {
  const char* text = std::getenv("NMT_KERNELS");
  if (text == nullptr || *text == '\0') return supported_kernel_level();
  const std::string value(text);
  for (KernelLevel level : {KernelLevel::kOff, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (value == to_string(level)) {
      if (level > supported_kernel_level()) {
        throw std::invalid_argument("NMT_KERNELS=" + value + ": this CPU (or build) runs at most " +
                                    to_string(supported_kernel_level()) + "; set NMT_KERNELS to that or lower");
      }
      return level;
    }
  }
  throw std::invalid_argument("NMT_KERNELS=" + value +
                              ": not one of off|avx2|avx512 (unset it for the best this CPU runs)");
}

std::atomic<int>& level_store() {
  static std::atomic<int> level{static_cast<int>(level_from_environment())};
  return level;
}

}  // namespace

std::string to_string(KernelLevel level) {
  switch (level) {
    case KernelLevel::kOff:
      return "off";
    case KernelLevel::kAvx2:
      return "avx2";
    case KernelLevel::kAvx512:
      return "avx512";
  }
  return "off";
}

KernelLevel supported_kernel_level() {
  if (!avx2_kernels_available()) return KernelLevel::kOff;
  return avx512_kernels_available() ? KernelLevel::kAvx512 : KernelLevel::kAvx2;
}

KernelLevel kernel_level() { return static_cast<KernelLevel>(level_store().load(std::memory_order_relaxed)); }

void set_kernel_level(KernelLevel level) {
  if (level > supported_kernel_level()) {
    throw std::invalid_argument("kernel level " + to_string(level) + ": this CPU (or build) runs at most " +
                                to_string(supported_kernel_level()));
  }
  level_store().store(static_cast<int>(level), std::memory_order_relaxed);
}

bool kernels_take(TensorRefs tensors) {
  if (kernel_level() < KernelLevel::kAvx2) return false;
  for (const torch::Tensor& tensor : tensors) {
    if (tensor.defined() && (!tensor.device().is_cpu() || tensor.scalar_type() != torch::kFloat)) return false;
  }
  return true;
}

bool packed_products_on() { return kernel_level() == KernelLevel::kAvx512; }

bool autograd_records(TensorRefs tensors) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor& tensor : tensors) {
    if (tensor.defined() && tensor.requires_grad()) return true;
  }
  return false;
}

}  // namespace nmt::kernels
