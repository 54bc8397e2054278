#include "model/linear/loop_weight.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>

#include "kernels/bf16_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/packed_gemm.h"
#include "model/linear/bf16_products.h"

namespace nmt {

torch::Tensor column_block(const torch::Tensor& tensor, const std::pair<int64_t, int64_t>& range) {
  return tensor.narrow(-1, range.first, range.second - range.first);
}

LoopWeight::LoopWeight(const torch::Tensor& weight) : plain_(weight.contiguous()) {
  TORCH_CHECK(plain_.dim() == 2, "LoopWeight: a matrix [depth, columns] expected");
  if (!kernels::use_kernel(kernels::Operation::kPackedProducts, {plain_})) return;
  const int64_t depth = plain_.size(0), width = plain_.size(1);
  const kernels::PackedKernel kernel = kernels::packed_kernel(bf16_products());
  avx512_ = kernel != kernels::PackedKernel::kAvx2;
  amx_ = kernel == kernels::PackedKernel::kAmx;
  bf16_ = amx_ || kernel == kernels::PackedKernel::kAvx512Bf16;
  if (bf16_) {
    packed_ = torch::empty({kernels::packed_bf16_size(depth, width)}, plain_.options().dtype(torch::kBFloat16));
    const int64_t panels = (width + kernels::kBf16Panel - 1) / kernels::kBf16Panel;
    const int64_t panel_values = kernels::padded_bf16_depth(depth) * kernels::kBf16Panel;
    at::parallel_for(0, panels, 4, [&](int64_t begin, int64_t end) {
      const int64_t first = begin * kernels::kBf16Panel, last = std::min(width, end * kernels::kBf16Panel);
      kernels::pack_weight_bf16(plain_.data_ptr<float>() + first, width, depth, last - first,
                                packed_bits() + begin * panel_values);
    });
    return;
  }
  packed_ = torch::empty({kernels::packed_size(depth, width)}, plain_.options());
  // Whole panels per thread (a panel is 16 columns; the last one may be narrower).
  const int64_t panels = (width + kernels::kPanelWidth - 1) / kernels::kPanelWidth;
  at::parallel_for(0, panels, 4, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * kernels::kPanelWidth, last = std::min(width, end * kernels::kPanelWidth);
    const auto pack = avx512_ ? kernels::pack_weight_avx512 : kernels::pack_weight_avx2;
    pack(plain_.data_ptr<float>() + first, width, depth, last - first, packed_.data_ptr<float>() + first * depth);
  });
}

void LoopWeight::multiply(const torch::Tensor& x, const torch::Tensor& init, const torch::Tensor& out,
                          const std::pair<int64_t, int64_t>& range) const {
  if (range.first >= range.second) return;  // an empty share (a thread left without columns)
  TORCH_CHECK(range.first >= 0 && range.second <= columns() && range.first % kernels::kPanelWidth == 0,
              "LoopWeight: a column range within the weight, starting on a multiple of ", kernels::kPanelWidth,
              " expected");
  if (!packed_.defined()) {
    torch::Tensor block = column_block(out, range);
    if (init.defined()) {
      at::addmm_out(block, column_block(init, range), x, column_block(plain_, range));
    } else {
      at::mm_out(block, x, column_block(plain_, range));
    }
    return;
  }
  TORCH_CHECK(x.dim() == 2 && x.size(1) == plain_.size(0) && out.dim() == 2 && out.size(0) == x.size(0) &&
                  out.size(1) == columns() && x.stride(1) == 1 && out.stride(1) == 1 &&
                  (!init.defined() || (init.size(-1) == columns() && init.stride(-1) == 1 &&
                                       (init.dim() == 1 || init.size(0) == x.size(0)))) &&
                  x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32 &&
                  kernels::on_cpu({x, out, init}) && (!init.defined() || init.scalar_type() == torch::kFloat32),
              "LoopWeight: x [B, depth] and out [B, columns], float32 rows on the CPU with unit column stride, "
              "expected");
  TORCH_CHECK(!x.is_alias_of(out), "LoopWeight: x and out must not share memory (out is written block by block)");
  if (bf16_) {
    const auto gemm = amx_ ? kernels::gemm_bf16_amx : kernels::gemm_bf16_avx512;
    gemm(x.data_ptr<float>(), x.stride(0), packed_bits(), plain_.size(0), columns(), x.size(0), range.first,
         range.second, init.defined() ? init.data_ptr<float>() : nullptr,
         init.defined() && init.dim() == 2 ? init.stride(0) : 0, out.data_ptr<float>(), out.stride(0));
    return;
  }
  const auto gemm = avx512_ ? kernels::gemm_packed_avx512 : kernels::gemm_packed_avx2;
  gemm(x.data_ptr<float>(), x.stride(0), packed_.data_ptr<float>(), plain_.size(0), columns(), x.size(0), range.first,
       range.second, init.defined() ? init.data_ptr<float>() : nullptr,
       init.defined() && init.dim() == 2 ? init.stride(0) : 0, out.data_ptr<float>(), out.stride(0));
}

}  // namespace nmt
