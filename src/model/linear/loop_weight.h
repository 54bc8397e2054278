// A weight that a recurrent loop multiplies by at every step: y = init + x W for a few rows x (a
// batch) and the same W [depth, columns] each time. With AVX2 or AVX-512 the weight is packed once,
// when the LoopWeight is made, for the kernel of the level then in force (kernels/packed_gemm.h);
// a BLAS call would repack all of it on every step. With NMT_KERNELS=off (kernels/dispatch.h)
// OpenBLAS multiplies by a contiguous copy, the reference.
// Made while a training step computes in bf16 (model/linear/bf16_products.h) on a CPU with AMX or
// AVX512_BF16, the weight is packed as bfloat16 for the tile kernel of kernels/bf16_kernels.h, or
// its vdpbf16ps kernel, instead.
// Used inside the fused loops (fused_cpu/decoder_pass.cpp, fused_cpu/bigru_layer.cpp), one LoopWeight per pass.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <utility>

namespace nmt {

class LoopWeight {
 public:
  LoopWeight() = default;
  // weight [depth, columns], float32 on the CPU, any strides (a transposed view is fine).
  explicit LoopWeight(const torch::Tensor& weight);

  // out[:, range] = init[:, range] + x W[:, range], range a block of columns starting at a
  // multiple of 16 (kernels::kPanelWidth): x [B, depth], out [B, columns], each with unit column
  // stride, x not sharing memory with out; init undefined (zero), a bias [columns] or a matrix
  // [B, columns] (out itself allowed). Writes only that block, so threads can share out by blocks
  // of columns.
  void multiply(const torch::Tensor& x, const torch::Tensor& init, const torch::Tensor& out,
                const std::pair<int64_t, int64_t>& range) const;
  // The same for all columns.
  void multiply(const torch::Tensor& x, const torch::Tensor& init, const torch::Tensor& out) const {
    multiply(x, init, out, {0, columns()});
  }

  int64_t columns() const { return plain_.size(1); }
  const torch::Tensor& weight() const { return plain_; }  // [depth, columns], contiguous
  // Whether the weight is packed for a kernel (else BLAS multiplies by plain_, the reference).
  bool packed() const { return packed_.defined(); }

 private:
  uint16_t* packed_bits() const { return static_cast<uint16_t*>(packed_.data_ptr()); }

  torch::Tensor plain_;   // [depth, columns], contiguous
  torch::Tensor packed_;  // kernels::pack_weight_*'s panels; undefined for the reference
  bool avx512_ = false;   // packed for (and multiplied by) the AVX-512 kernel, else the AVX2 one
  bool bf16_ = false;     // packed as bfloat16 (packed_ holds its bits) for a bf16 kernel:
  bool amx_ = false;      // the AMX one, else the AVX512_BF16 one
};

// Columns [range.first, range.second) of a matrix (or a vector's elements), as a view.
torch::Tensor column_block(const torch::Tensor& tensor, const std::pair<int64_t, int64_t>& range);

}  // namespace nmt
