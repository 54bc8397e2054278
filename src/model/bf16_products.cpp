#include "model/bf16_products.h"

#include <torch/torch.h>

#include <atomic>

namespace nmt {
namespace {

std::atomic<bool> bf16_enabled{false};

}  // namespace

bool cpu_has_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
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
