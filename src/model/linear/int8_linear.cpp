#include "model/linear/int8_linear.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>

#include "kernels/dispatch.h"
#include "kernels/int8_gemm.h"

namespace nmt {

QuantizedRows quantize_rows(const torch::Tensor& weight) {
  const torch::Tensor w = weight.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  const torch::Tensor largest = w.abs().amax(1);                                                 // [N]
  torch::Tensor scales = torch::where(largest > 0, largest / 127.0, torch::ones_like(largest));  // [N]
  torch::Tensor values = (w / scales.unsqueeze(1)).round().clamp(-127, 127).to(torch::kInt8).contiguous();
  return {std::move(values), std::move(scales)};
}

torch::Tensor dequantize_rows(const QuantizedRows& rows) {
  return rows.values.to(torch::kFloat32) * rows.scales.unsqueeze(1);
}

Int8Linear::Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2 && kernels::on_cpu({weight}), "Int8Linear: weight [N, K] on the CPU expected");
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), "Int8Linear: bias [N] expected");
  QuantizedRows rows = quantize_rows(weight);
  quantized_ = std::move(rows.values);
  scale_ = std::move(rows.scales);
  if (bias.defined()) bias_ = bias.detach().to(torch::kFloat32).contiguous();
  pack();
}

void Int8Linear::pack(torch::Tensor column_sums) {
  const int64_t rows = quantized_.size(0), depth = quantized_.size(1);
  packed_ = torch::empty({kernels::int8_packed_size(rows, depth)}, torch::kInt8);
  kernels::pack_int8_weight(quantized_.data_ptr<int8_t>(), depth, rows, depth, packed_.data_ptr<int8_t>());
  column_sums_ = column_sums.defined() ? std::move(column_sums).contiguous()
                                       : quantized_.sum(1, /*keepdim=*/false, torch::kInt32).contiguous();
}

Int8Linear Int8Linear::rows(const torch::Tensor& ids) const {
  const torch::Tensor index = ids.to(torch::kCPU, torch::kInt64);
  Int8Linear selected;
  selected.quantized_ = quantized_.index_select(0, index).contiguous();
  selected.scale_ = scale_.index_select(0, index).contiguous();
  if (bias_.defined()) selected.bias_ = bias_.index_select(0, index).contiguous();
  selected.pack(column_sums_.index_select(0, index));
  return selected;
}

torch::Tensor Int8Linear::dequantized_weight() const { return dequantize_rows({quantized_, scale_}); }

namespace {

using kernels::Int8Kernel;

int32_t limit_of(Int8Kernel kernel) {
  return kernel == Int8Kernel::kAvx2 ? kernels::kInt8Avx2Limit : kernels::kInt8Limit;
}

}  // namespace

int32_t Int8Linear::activation_limit() { return limit_of(kernels::int8_kernel()); }

torch::Tensor Int8Linear::operator()(const torch::Tensor& input) const {
  torch::Tensor out = torch::empty({input.size(0), out_features()}, torch::kFloat32);
  (*this)(input, out);
  return out;
}

void Int8Linear::operator()(const torch::Tensor& input, const torch::Tensor& out) const {
  TORCH_CHECK(input.dim() == 2 && input.size(1) == in_features() && kernels::on_cpu({input}), "Int8Linear: input [M, ",
              in_features(), "] on the CPU expected");
  RECORD_FUNCTION("nmt::int8_linear", std::vector<c10::IValue>());  // named in nmt_bench --profile traces
  const torch::Tensor x = input.to(torch::kFloat32).contiguous();
  const int64_t m = x.size(0), depth = in_features(), columns = out_features();
  TORCH_CHECK(out.dim() == 2 && out.size(0) == m && out.size(1) == columns && out.stride(1) == 1 &&
                  out.scalar_type() == torch::kFloat32 && kernels::on_cpu({out}),
              "Int8Linear: out [", m, ", ", columns, "] float32 on the CPU with contiguous rows expected");
  const torch::Tensor a = torch::empty({m, kernels::int8_depth(depth)}, torch::kInt8);
  const torch::Tensor row_scale = torch::empty({m}, torch::kFloat32);
  const Int8Kernel which = kernels::int8_kernel();
  const auto kernel = which == Int8Kernel::kVnni   ? kernels::int8_gemm_vnni
                      : which == Int8Kernel::kAvx2 ? kernels::int8_gemm_avx2
                                                   : kernels::int8_gemm_reference;
  const auto quantize =
      which == Int8Kernel::kReference ? kernels::quantize_int8_rows : kernels::quantize_int8_rows_avx2;
  const int32_t limit = limit_of(which);
  const int64_t padded = kernels::int8_depth(depth);
  at::parallel_for(0, m, std::max<int64_t>(1, (int64_t{1} << 14) / depth), [&](int64_t begin, int64_t end) {
    quantize(x.data_ptr<float>() + begin * depth, depth, end - begin, depth, limit,
             a.data_ptr<int8_t>() + begin * padded, row_scale.data_ptr<float>() + begin);
  });
  const kernels::Int8Product product{a.data_ptr<int8_t>(),
                                     m,
                                     packed_.data_ptr<int8_t>(),
                                     depth,
                                     columns,
                                     row_scale.data_ptr<float>(),
                                     scale_.data_ptr<float>(),
                                     bias_.defined() ? bias_.data_ptr<float>() : nullptr,
                                     column_sums_.data_ptr<int32_t>(),
                                     out.data_ptr<float>(),
                                     out.stride(0)};
  // Blocks of panels per thread, each worth at least about 2^16 multiply-adds.
  const int64_t panels = kernels::int8_panels(columns);
  const int64_t per_panel = std::max<int64_t>(1, m * kernels::int8_depth(depth) * kernels::kInt8PanelRows);
  at::parallel_for(0, panels, std::max<int64_t>(1, (int64_t{1} << 16) / per_panel), [&](int64_t begin, int64_t end) {
    kernel(product, begin * kernels::kInt8PanelRows, std::min(end * kernels::kInt8PanelRows, columns));
  });
}

}  // namespace nmt
