// Training with precision bf16 on a CPU that has bf16 dot products (AVX512_BF16, AMX): the large
// products round both factors to bfloat16 and sum in float32 (LibTorch's oneDNN matmul), returning
// float32. They are the output layer's (forward and backward: train/loss.cpp), every input-gate and
// attention-key projection over all positions (training_linear), and the recurrent loops' weight
// gradients (training_product), one product over all positions each. The loops' per-step products
// are bfloat16 too (model/linear/loop_weight.h: on AMX tiles, or with AVX512_BF16). Weights, optimizer
// state and the loss stay float32. (On a GPU, precision bf16 is autocast instead: util/runtime.h.)
//
// The setting is the process's, for a training step's scope (forward and backward; the loops'
// threads read it too): a process trains one model at a time.
#pragma once

#include <torch/types.h>

namespace nmt {

class Bf16ProductsScope {
 public:
  explicit Bf16ProductsScope(bool enabled);
  ~Bf16ProductsScope();
  Bf16ProductsScope(const Bf16ProductsScope&) = delete;
  Bf16ProductsScope& operator=(const Bf16ProductsScope&) = delete;

 private:
  bool was_enabled_;
};

// Whether the products are in bf16 now.
bool bf16_products();

// a [M, K] times b [K, N] in float32: a.mm(b), or with bf16_products() in bf16 with float32 sums,
// outside autograd (for backward passes and custom functions: it records no gradient in bf16).
torch::Tensor training_product(const torch::Tensor& a, const torch::Tensor& b);
// x W^T + b (bias may be undefined), through autograd: torch::nn::functional::linear, or with
// bf16_products() its factors in bf16 (the backward's products too) and the result in float32.
torch::Tensor training_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// The conversions these use, outside autograd: float32 to bfloat16 (to nearest, ties to even) and
// back, with kernels/bf16_kernels.h's AVX-512 kernels (Operation::kBf16Conversions) or Tensor::to.
// A transposed matrix converts as its contiguous original; to_float adds a bias to each row on the
// way (bias [columns] or undefined).
torch::Tensor to_bf16(const torch::Tensor& tensor);
torch::Tensor to_float(const torch::Tensor& tensor, const torch::Tensor& bias = {});
// The same into existing rows: out (float32) = in (bfloat16) + bias, or out (bfloat16) = in (float32).
void to_float_into(const torch::Tensor& in, const torch::Tensor& bias, const torch::Tensor& out);
void to_bf16_into(const torch::Tensor& in, const torch::Tensor& out);

}  // namespace nmt
