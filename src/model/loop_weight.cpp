#include "model/loop_weight.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/packed_gemm.h"

namespace nmt {

namespace {

torch::Tensor column_block(const torch::Tensor& tensor, const std::pair<int64_t, int64_t>& range) {
  return tensor.narrow(-1, range.first, range.second - range.first);
}

}  // namespace

LoopWeight::LoopWeight(const torch::Tensor& weight) : plain_(weight.contiguous()) {
  TORCH_CHECK(plain_.dim() == 2, "LoopWeight: a matrix [depth, columns] expected");
  if (!kernels::avx512_kernels_available() || plain_.scalar_type() != torch::kFloat32 || !plain_.is_cpu()) return;
  const int64_t depth = plain_.size(0), width = plain_.size(1);
  packed_ = torch::empty({kernels::packed_size(depth, width)}, plain_.options());
  // Whole panels per thread: a grain of 64 columns starts each range on a panel.
  at::parallel_for(0, width, 4 * kernels::kPanelWidth, [&](int64_t begin, int64_t end) {
    kernels::pack_weight(plain_.data_ptr<float>() + begin, width, depth, end - begin,
                         packed_.data_ptr<float>() + begin * depth);
  });
}

void LoopWeight::multiply(const torch::Tensor& x, const torch::Tensor& init, const torch::Tensor& out,
                          const std::pair<int64_t, int64_t>& range) const {
  if (range.first >= range.second) return;
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
                  x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32,
              "LoopWeight: x [B, depth] and out [B, columns], float32 rows with unit column stride, expected");
  kernels::gemm_packed(x.data_ptr<float>(), x.stride(0), packed_.data_ptr<float>(), plain_.size(0), columns(),
                       x.size(0), range.first, range.second, init.defined() ? init.data_ptr<float>() : nullptr,
                       init.defined() && init.dim() == 2 ? init.stride(0) : 0, out.data_ptr<float>(), out.stride(0));
}

}  // namespace nmt
