#include "model/linear/packed_linear.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>

#include "kernels/dispatch.h"
#include "kernels/packed_gemm.h"

namespace nmt {

PackedLinear::PackedLinear(const torch::Tensor& weight, const torch::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2 && kernels::on_cpu({weight}) && weight.scalar_type() == torch::kFloat32,
              "PackedLinear: weight [N, K] float32 on the CPU expected");
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)),
              "PackedLinear: bias [N] expected");
  if (bias.defined()) bias_ = bias.detach().to(torch::kFloat32).clone(at::MemoryFormat::Contiguous);
  packed_ = LoopWeight(weight.detach().t().clone(at::MemoryFormat::Contiguous));
}

PackedLinear PackedLinear::rows(const torch::Tensor& ids) const {
  const torch::Tensor index = ids.to(torch::kCPU, torch::kInt64);
  return PackedLinear(packed_.weight().index_select(1, index).t(),
                      bias_.defined() ? bias_.index_select(0, index) : torch::Tensor());
}

torch::Tensor PackedLinear::operator()(const torch::Tensor& input) const {
  TORCH_CHECK(input.dim() == 2 && input.size(1) == in_features() && kernels::on_cpu({input}),
              "PackedLinear: input [M, ", in_features(), "] on the CPU expected");
  RECORD_FUNCTION("nmt::packed_linear", std::vector<c10::IValue>());  // named in nmt_bench --profile traces
  const torch::Tensor x = input.to(torch::kFloat32).contiguous();
  const int64_t m = x.size(0), columns = out_features();
  torch::Tensor out = torch::empty({m, columns}, torch::kFloat32);
  if (m == 0) return out;
  if (!packed_.packed()) {  // the reference: one BLAS call, threaded as BLAS threads it
    packed_.multiply(x, bias_, out);
    return out;
  }
  // Blocks of 16-column panels per thread, each worth at least about 2^16 multiply-adds.
  const int64_t panels = (columns + kernels::kPanelWidth - 1) / kernels::kPanelWidth;
  const int64_t per_panel = std::max<int64_t>(1, m * in_features() * kernels::kPanelWidth);
  at::parallel_for(0, panels, std::max<int64_t>(1, (int64_t{1} << 16) / per_panel), [&](int64_t begin, int64_t end) {
    packed_.multiply(x, bias_, out, {begin * kernels::kPanelWidth, std::min(end * kernels::kPanelWidth, columns)});
  });
  return out;
}

}  // namespace nmt
