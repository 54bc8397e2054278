#include "util/device_rules.h"

#include <cstdlib>
#include <stdexcept>

#include "kernels/dispatch.h"
#include "util/runtime.h"

namespace nmt {

bool queues_work(const torch::Device& device) { return device.is_cuda(); }

size_t batch_workers(const torch::Device& device, size_t threads) { return device.is_cpu() ? threads : 1; }

bool has_library_gru_kernels(const torch::Device& device) { return device.is_cuda(); }

bool has_library_fused_adam(const torch::Device& device) { return device.is_cuda(); }

std::string collective_backend(const torch::Device& device) { return device.is_cuda() ? "nccl" : "gloo"; }

bool has_own_generator(const torch::Device& device) { return device.is_cuda(); }

void check_bf16_training(const torch::Device& device) {
  if (device.is_cpu()) {
    if (!kernels::cpu_has_bf16()) {
      throw std::invalid_argument(
          "precision bf16: this CPU has no bfloat16 dot products (AVX512_BF16 or AMX, as on Zen 4 and Xeons "
          "since Cooper Lake); use precision fp32");
    }
    // oneDNN (the bf16 products) marks every primitive it runs for Intel's ITT tracing, profiler or
    // not, a measurable share of an update; it reads this once, at its first product, which comes
    // after this. A user's own setting wins.
    setenv("DNNL_ITT_TASK_LEVEL", "0", /*overwrite=*/0);
    setenv("ONEDNN_ITT_TASK_LEVEL", "0", /*overwrite=*/0);
  } else if (device.is_cuda() && !has_bf16(device)) {
    throw std::invalid_argument(
        "precision bf16: this GPU has no full-speed bfloat16 (compute capability 8.0 or "
        "later: A100, H100 and newer); use precision fp32");
  }
}

}  // namespace nmt
