// A linear map y = x W^T + b in float32 for decoding on the CPU, with W packed once when the model
// loads: torch's linear map (a BLAS call) repacks the whole weight on every call, and a decoder
// step multiplies a few rows by the same weights at every step. The products are the loops'
// register-blocked kernels (linear/loop_weight.h, kernels/packed_gemm.h), split over the threads by
// blocks of output columns; with NMT_KERNELS=off, BLAS's product, the reference.
// Each output is one row of x times one column of W^T, summed in the same order whatever the other
// rows and columns are: a sentence's step gives the same bits in any batch, and a shortlist's rows
// (rows()) the same bits as the whole layer.
//
// Shapes: M rows of input, K input features, N output features.
#pragma once

#include <torch/types.h>

#include "model/linear/loop_weight.h"

namespace nmt {

class PackedLinear {
 public:
  PackedLinear() = default;
  // weight [N, K] float32 on the CPU, bias [N] or undefined: copied, so that the map stays as it
  // was made whatever happens to them later.
  PackedLinear(const torch::Tensor& weight, const torch::Tensor& bias);

  torch::Tensor operator()(const torch::Tensor& input) const;  // [M, K] -> [M, N] float32

  // The map of the output rows `ids` [N'] only (a shortlist's output layer).
  PackedLinear rows(const torch::Tensor& ids) const;

  int64_t out_features() const { return packed_.weight().size(1); }
  int64_t in_features() const { return packed_.weight().size(0); }

 private:
  torch::Tensor bias_;  // [N] contiguous, or undefined
  LoopWeight packed_;   // W^T [K, N], and its packed panels
};

}  // namespace nmt
