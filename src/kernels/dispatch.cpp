#include "kernels/dispatch.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
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

// What use_kernel() needs to know of an operation.
struct OperationRule {
  const char* name;             // in the log
  KernelLevel least;            // the lowest level that runs the kernel
  bool float32_only;            // the kernel takes float32 tensors only (otherwise any type, on the CPU)
  const char* kernel;           // what runs when the kernel does, for the log
  const char* reference;        // what runs otherwise
  bool (*cpu_has)() = nullptr;  // what the CPU must have besides the level (kernels/available.h)
};

OperationRule operation_rule(Operation operation) {
  switch (operation) {
    case Operation::kGruStep:
      return {"gru_step", KernelLevel::kAvx2, true, "avx2", "the LibTorch reference"};
    case Operation::kAdditiveEnergy:
      return {"additive_energy", KernelLevel::kAvx2, true, "avx2", "the LibTorch reference"};
    case Operation::kWeightedSum:
      return {"weighted_sum", KernelLevel::kAvx2, true, "avx2", "the LibTorch reference"};
    case Operation::kOutputLayerLoss:
      return {"output_layer_loss", KernelLevel::kAvx2, true, "avx2", "the LibTorch reference"};
    case Operation::kBiGruLayer:
      return {"bigru_layer", KernelLevel::kAvx2, true, "avx2 (both directions fused)",
              "the reference (one direction at a time)"};
    case Operation::kDecoderLoop:
      return {"decoder_loop", KernelLevel::kAvx2, true, "avx2 (the fused loop)", "the reference (step by step)"};
    case Operation::kPackedProducts:
      return {"packed_products", KernelLevel::kAvx2, true, "avx512 (amx in bf16) or avx2, as the level in force",
              "the reference (BLAS)"};
    case Operation::kInt8Products:
      return {"int8_products", KernelLevel::kAvx2, false, "avx512 vnni (at level avx512) or avx2",
              "the int8 reference"};
    case Operation::kAdam:
      return {"adam", KernelLevel::kAvx2, true, "avx2", "the LibTorch reference"};
    case Operation::kDropoutMask:
      return {"dropout_mask", KernelLevel::kAvx2, false, "the hashed mask", "the LibTorch reference"};
    case Operation::kLogSoftmax:
      return {"log_softmax", KernelLevel::kAvx2, true, "avx2 (with the beam's top-k fused)", "the LibTorch reference"};
    case Operation::kBf16Conversions:
      return {"bf16_conversions", KernelLevel::kAvx512,     false,
              "avx512",           "LibTorch's conversions", bf16_kernels_available};
  }
  return {"unknown", KernelLevel::kAvx512, true, "", ""};
}

constexpr size_t kOperationCount = static_cast<size_t>(Operation::kBf16Conversions) + 1;  // the last one listed

// Logs `operation`'s path the first time it is taken. Zero-initialised: nothing logged yet.
void log_first_path(Operation operation, bool kernel) {
  static std::array<std::array<std::atomic<bool>, 2>, kOperationCount> logged{};
  std::atomic<bool>& done = logged[static_cast<size_t>(operation)][kernel ? 1 : 0];
  if (done.load(std::memory_order_relaxed) || done.exchange(true, std::memory_order_relaxed)) return;
  const OperationRule path = operation_rule(operation);
  spdlog::debug("kernels: {} uses {}", path.name, kernel ? path.kernel : path.reference);
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

bool run_on(const torch::Device& device) { return device.is_cpu(); }

bool on_cpu(TensorRefs tensors) {
  return std::all_of(tensors.begin(), tensors.end(),
                     [](const torch::Tensor& tensor) { return !tensor.defined() || run_on(tensor.device()); });
}

bool use_kernel(Operation operation, TensorRefs tensors, bool fits) {
  const OperationRule wanted = operation_rule(operation);
  const auto takes = [&](const torch::Tensor& tensor) {
    return !tensor.defined() ||
           (run_on(tensor.device()) && (!wanted.float32_only || tensor.scalar_type() == torch::kFloat));
  };
  const bool kernel = fits && kernel_level() >= wanted.least && (wanted.cpu_has == nullptr || wanted.cpu_has()) &&
                      std::all_of(tensors.begin(), tensors.end(), takes);
  log_first_path(operation, kernel);
  return kernel;
}

bool autograd_records(TensorRefs tensors) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor& tensor : tensors) {
    if (tensor.defined() && tensor.requires_grad()) return true;
  }
  return false;
}

Int8Kernel int8_kernel() {
  if (!use_kernel(Operation::kInt8Products)) return Int8Kernel::kReference;
  const bool vnni = kernel_level() == KernelLevel::kAvx512 && vnni_kernels_available();
  return vnni ? Int8Kernel::kVnni : Int8Kernel::kAvx2;
}

PackedKernel packed_kernel(bool bf16) {
  if (kernel_level() != KernelLevel::kAvx512) return PackedKernel::kAvx2;
  if (bf16 && amx_kernels_available()) return PackedKernel::kAmx;
  if (bf16 && avx512_bf16_kernels_available()) return PackedKernel::kAvx512Bf16;
  return PackedKernel::kAvx512;
}

bool cpu_has_bf16() {
  const CpuFeatures features = cpu_features();
  return features.avx512_bf16 || features.amx_bf16;
}

}  // namespace nmt::kernels
