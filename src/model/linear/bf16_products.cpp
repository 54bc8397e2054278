#include "model/linear/bf16_products.h"

#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/bf16_kernels.h"
#include "kernels/dispatch.h"

namespace nmt {
namespace {

std::atomic<bool> bf16_enabled{false};

}  // namespace

Bf16ProductsScope::Bf16ProductsScope(bool enabled) : was_enabled_(bf16_enabled) { bf16_enabled = enabled; }

Bf16ProductsScope::~Bf16ProductsScope() { bf16_enabled = was_enabled_; }

bool bf16_products() { return bf16_enabled; }

namespace {

// Whether the AVX-512 conversions take these (contiguous, on the CPU) at the level in force.
bool fast_conversion(const torch::Tensor& in, const torch::Tensor& out) {
  return kernels::use_kernel(
      kernels::Operation::kBf16Conversions, {},
      kernels::on_cpu({in, out}) && in.is_contiguous() && out.is_contiguous() && in.numel() == out.numel());
}

uint16_t* bits(const torch::Tensor& tensor) { return static_cast<uint16_t*>(tensor.data_ptr()); }

constexpr int64_t kConversionGrain = 1 << 15;  // elements per task of a conversion

}  // namespace

void to_bf16_into(const torch::Tensor& in, const torch::Tensor& out) {
  TORCH_CHECK(in.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kBFloat16,
              "to_bf16_into: float32 in, bfloat16 out expected");
  if (!fast_conversion(in, out)) {
    out.copy_(in);
    return;
  }
  const float* source = in.data_ptr<float>();
  uint16_t* target = bits(out);
  at::parallel_for(0, in.numel(), kConversionGrain, [&](int64_t begin, int64_t end) {
    kernels::round_to_bf16(source + begin, target + begin, end - begin);
  });
}

void to_float_into(const torch::Tensor& in, const torch::Tensor& bias, const torch::Tensor& out) {
  TORCH_CHECK(in.scalar_type() == torch::kBFloat16 && out.scalar_type() == torch::kFloat32 &&
                  (!bias.defined() || (bias.dim() == 1 && bias.size(0) == in.size(-1))),
              "to_float_into: bfloat16 in, float32 out and a bias [columns] or none expected");
  if (!fast_conversion(in, out) ||
      (bias.defined() && (!bias.is_contiguous() || bias.scalar_type() != torch::kFloat32))) {
    out.copy_(bias.defined() ? in.to(torch::kFloat32) + bias : in);
    return;
  }
  const int64_t columns = in.dim() == 0 ? 1 : in.size(-1), rows = columns == 0 ? 0 : in.numel() / columns;
  const uint16_t* source = bits(in);
  float* target = out.data_ptr<float>();
  const float* add = bias.defined() ? bias.data_ptr<float>() : nullptr;
  at::parallel_for(0, rows, std::max<int64_t>(1, kConversionGrain / std::max<int64_t>(1, columns)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       kernels::widen_bf16(source + row * columns, add, target + row * columns, columns);
                     }
                   });
}

torch::Tensor to_bf16(const torch::Tensor& tensor) {
  if (tensor.scalar_type() == torch::kBFloat16) return tensor;
  if (tensor.dim() == 2 && !tensor.is_contiguous() && tensor.t().is_contiguous()) return to_bf16(tensor.t()).t();
  const torch::Tensor source = tensor.contiguous();
  torch::Tensor out = torch::empty(source.sizes(), source.options().dtype(torch::kBFloat16));
  to_bf16_into(source, out);
  return out;
}

torch::Tensor to_float(const torch::Tensor& tensor, const torch::Tensor& bias) {
  const torch::Tensor source = tensor.contiguous();
  torch::Tensor out = torch::empty(source.sizes(), source.options().dtype(torch::kFloat32));
  to_float_into(source, bias, out);
  return out;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// x W^T + b with both factors in bfloat16 and float32 sums, its backward's products likewise: the
// conversions are ours, outside autograd, and the factors are rounded once. An empty bias is none.
struct Bf16Linear : public torch::autograd::Function<Bf16Linear> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    const torch::Tensor rows = x.reshape({-1, x.size(-1)});
    const torch::Tensor x16 = to_bf16(rows), weight16 = to_bf16(weight);
    context->save_for_backward({x16, weight16});
    context->saved_data["shape"] = x.sizes();
    context->saved_data["bias"] = bias.numel() > 0;
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return to_float(x16.mm(weight16.t()), bias.numel() > 0 ? bias : torch::Tensor()).view(shape);
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor& x16 = saved[0];
    const torch::Tensor& weight16 = saved[1];
    const torch::Tensor grad = gradients[0].reshape({-1, gradients[0].size(-1)});
    const torch::Tensor grad16 = to_bf16(grad);
    torch::Tensor grad_x, grad_weight, grad_bias;
    if (context->needs_input_grad(0))
      grad_x = to_float(grad16.mm(weight16)).view(context->saved_data["shape"].toIntVector());
    if (context->needs_input_grad(1)) grad_weight = to_float(grad16.t().mm(x16));
    if (context->needs_input_grad(2) && context->saved_data["bias"].toBool()) grad_bias = grad.sum(0);
    return {grad_x, grad_weight, grad_bias};
  }
};

}  // namespace

torch::Tensor training_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!bf16_enabled) return torch::nn::functional::linear(x, weight, bias);
  return Bf16Linear::apply(x, weight, bias.defined() ? bias : torch::empty({0}, weight.options()));
}

torch::Tensor training_product(const torch::Tensor& a, const torch::Tensor& b) {
  if (!bf16_enabled) return a.mm(b);
  return to_float(to_bf16(a).mm(to_bf16(b)));
}

}  // namespace nmt
