// A linear map y = x W^T + b in int8, for decoding with compute type int8: W quantized once per
// output row (symmetric, a float scale each), x per row at every call, the products summed in
// int32 by the kernels of kernels/int8_gemm.h: AVX-512 VNNI, or the plain reference with
// NMT_KERNELS=off, the same floats, the activations in 8 bits; or AVX2, the activations in 6 bits
// (int8_gemm.h says why). Inference only, on the CPU, float32 in and out.
//
// Shapes: M rows of input, K input features, N output features.
#pragma once

#include <torch/types.h>

namespace nmt {

// A matrix [N, K] quantized per row: values = round(W / scale) in int8 [N, K], scale = max |W_n| / 127
// in float32 [N] (1 for a row of zeros).
struct QuantizedRows {
  torch::Tensor values;
  torch::Tensor scales;
};
QuantizedRows quantize_rows(const torch::Tensor& weight);
// values * scales, float32 [N, K]: the same bits for the same QuantizedRows, wherever it is done.
torch::Tensor dequantize_rows(const QuantizedRows& rows);

class Int8Linear {
 public:
  Int8Linear() = default;
  // weight [N, K] float32, bias [N] or undefined.
  Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias);

  torch::Tensor operator()(const torch::Tensor& input) const;  // [M, K] -> [M, N] float32
  // The same into `out` [M, N] float32 (rows contiguous, any row stride), as a loop reuses it.
  void operator()(const torch::Tensor& input, const torch::Tensor& out) const;

  // The map of the output rows `ids` [N'] only (a shortlist's output layer).
  Int8Linear rows(const torch::Tensor& ids) const;
  // W as the products see it: the int8 rows times their scales [N, K].
  torch::Tensor dequantized_weight() const;

  // The largest activation magnitude the products take at the kernel level in force (the input's
  // rows are quantized to it): 127, or 31 for the AVX2 kernel.
  static int32_t activation_limit();

  int64_t out_features() const { return quantized_.size(0); }
  int64_t in_features() const { return quantized_.size(1); }

 private:
  // packed_ and column_sums_ from quantized_ (the sums given, when known).
  void pack(torch::Tensor column_sums = torch::Tensor());

  torch::Tensor quantized_;    // [N, K] int8, round(W / scale) (quantize_rows)
  torch::Tensor scale_;        // [N] float32, max |W_n| / 127
  torch::Tensor bias_;         // [N] float32, or undefined
  torch::Tensor packed_;       // the kernels' panels (kernels/int8_gemm.h), int8
  torch::Tensor column_sums_;  // [N] int32, sum_k q[n, k] (the VNNI and AVX2 kernels' correction)
};

}  // namespace nmt
