#include "model/bf16_products.h"

#include <torch/torch.h>

#include <atomic>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace nmt {
namespace {

std::atomic<bool> bf16_enabled{false};

}  // namespace

bool cpu_has_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  // CPUID leaf 7: AMX-BF16 is EDX bit 22 of subleaf 0, AVX512_BF16 EAX bit 5 of subleaf 1 (read
  // directly: not every compiler's __builtin_cpu_supports knows these names). Either needs AVX-512
  // (or AMX) state that the system saves, which AVX-512 Foundation's check covers.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__builtin_cpu_supports("avx512f") || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx >> 22) & 1u;
  const unsigned subleaves = eax;
  bool avx512_bf16 = false;
  if (subleaves >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) avx512_bf16 = (eax >> 5) & 1u;
  return avx512_bf16 || amx_bf16;
#else
  return false;
#endif
}

Bf16ProductsScope::Bf16ProductsScope(bool enabled) : was_enabled_(bf16_enabled) { bf16_enabled = enabled; }

Bf16ProductsScope::~Bf16ProductsScope() { bf16_enabled = was_enabled_; }

bool bf16_products() { return bf16_enabled; }

torch::Tensor training_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!bf16_enabled) return torch::nn::functional::linear(x, weight, bias);
  torch::Tensor y =
      torch::nn::functional::linear(x.to(torch::kBFloat16), weight.to(torch::kBFloat16)).to(torch::kFloat32);
  return bias.defined() ? y + bias : y;
}

torch::Tensor training_product(const torch::Tensor& a, const torch::Tensor& b) {
  if (!bf16_enabled) return a.mm(b);
  return a.to(torch::kBFloat16).mm(b.to(torch::kBFloat16)).to(torch::kFloat32);
}

}  // namespace nmt
