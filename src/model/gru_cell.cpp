#include "model/gru_cell.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/gru_kernels.h"
#include "util/device_rules.h"

namespace nmt {

GruCellImpl::GruCellImpl(int64_t hidden_size) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));  // as torch::nn::GRU
  weight_hh = register_parameter("weight_hh", torch::empty({3 * hidden_size, hidden_size}).uniform_(-bound, bound));
  bias_hh = register_parameter("bias_hh", torch::empty({3 * hidden_size}).uniform_(-bound, bound));
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kGrain = 16;  // rows per thread

// gi, gh [B, 3H], h [B, H], contiguous float; saved [B, 4H] or undefined (inference).
torch::Tensor fused_step(const torch::Tensor& gi, const torch::Tensor& gh, const torch::Tensor& h,
                         const torch::Tensor& saved) {
  const int64_t size = h.size(1);
  torch::Tensor next = torch::empty_like(h);
  at::parallel_for(0, h.size(0), kGrain, [&](int64_t begin, int64_t end) {
    kernels::gru_step(gi.data_ptr<float>() + begin * 3 * size, gh.data_ptr<float>() + begin * 3 * size,
                      h.data_ptr<float>() + begin * size, end - begin, size, next.data_ptr<float>() + begin * size,
                      saved.defined() ? saved.data_ptr<float>() + begin * 4 * size : nullptr);
  });
  return next;
}

// The step as one autograd node over the kernels of kernels/gru_kernels.h.
struct FusedGruStep : public torch::autograd::Function<FusedGruStep> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& gi, const torch::Tensor& gh,
                               const torch::Tensor& h) {
    torch::Tensor saved = torch::empty({h.size(0), 4 * h.size(1)}, h.options());  // (r, z, n, gh_n) per row
    torch::Tensor next = fused_step(gi, gh, h, saved);
    context->save_for_backward({saved, h});
    return next;
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    const auto tensors = context->get_saved_variables();
    const torch::Tensor& saved = tensors[0];
    const torch::Tensor& h = tensors[1];
    const torch::Tensor grad = gradients[0].contiguous();
    const int64_t size = h.size(1);
    torch::Tensor grad_gi = torch::empty({h.size(0), 3 * size}, h.options());
    torch::Tensor grad_gh = torch::empty_like(grad_gi);
    torch::Tensor grad_h = torch::empty_like(h);
    at::parallel_for(0, h.size(0), kGrain, [&](int64_t begin, int64_t end) {
      kernels::gru_step_backward(grad.data_ptr<float>() + begin * size, saved.data_ptr<float>() + begin * 4 * size,
                                 h.data_ptr<float>() + begin * size, end - begin, size,
                                 grad_gi.data_ptr<float>() + begin * 3 * size,
                                 grad_gh.data_ptr<float>() + begin * 3 * size, grad_h.data_ptr<float>() + begin * size);
    });
    return {grad_gi, grad_gh, grad_h};
  }
};

}  // namespace

torch::Tensor GruCellImpl::from_gates(const torch::Tensor& input_gates, const torch::Tensor& hidden_gates,
                                      const torch::Tensor& hidden) {
  TORCH_CHECK(hidden.dim() == 2 && input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() &&
                  input_gates.size(0) == hidden.size(0) && input_gates.size(1) == 3 * hidden.size(1),
              "GRU step: gates [B, 3H] and hidden [B, H] expected");
  if (kernels::use_kernel(kernels::Operation::kGruStep, {input_gates, hidden_gates, hidden})) {
    if (!kernels::autograd_records({input_gates, hidden_gates, hidden})) {
      return fused_step(input_gates.contiguous(), hidden_gates.contiguous(), hidden.contiguous(), {});
    }
    return FusedGruStep::apply(input_gates.contiguous(), hidden_gates.contiguous(), hidden.contiguous());
  }
  if (has_library_gru_kernels(input_gates.device())) {  // one kernel each way, as torch::nn::GRUCell runs on a GPU
    return std::get<0>(
        at::_thnn_fused_gru_cell(input_gates.contiguous(), hidden_gates.contiguous(), hidden.contiguous()));
  }
  // The same step in LibTorch's ops (other devices and types, CPUs without AVX2).
  auto input_parts = input_gates.chunk(3, /*dim=*/1);
  auto hidden_parts = hidden_gates.chunk(3, /*dim=*/1);
  torch::Tensor reset = torch::sigmoid(input_parts[0] + hidden_parts[0]);
  torch::Tensor update = torch::sigmoid(input_parts[1] + hidden_parts[1]);
  torch::Tensor candidate = torch::tanh(input_parts[2] + reset * hidden_parts[2]);
  return candidate + update * (hidden - candidate);  // = (1 - z) * n + z * h
}

}  // namespace nmt
