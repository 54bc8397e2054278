// The recurrent half of a GRU cell, taking precomputed input gates. Splitting the input
// projection out lets the decoder compute it for all target embeddings in one matrix multiply
// (training) instead of once per step. Same equations and gate order (r, z, n) as torch::nn::GRU:
//   r = sigmoid(gi_r + W_hr h + b_hr), z = sigmoid(gi_z + W_hz h + b_hz)
//   n = tanh(gi_n + r * (W_hn h + b_hn)),  h' = (1 - z) * n + z * h
// Cho et al. 2014, eq. 5-8.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace nmt {

class GruCellImpl : public torch::nn::Module {
 public:
  explicit GruCellImpl(int64_t hidden_size);

  // input_gates [B, 3H] (= W_i x + b_i), hidden_gates [B, 3H] (= W_h h + b_h, computed by the
  // caller with a LoopLinear of weight_hh and bias_hh), hidden [B, H] -> new hidden [B, H].
  // Float32 on a CPU with AVX2: one kernel forward and one backward (kernels/gru_kernels.h);
  // otherwise the equations above in LibTorch's operators.
  static torch::Tensor from_gates(const torch::Tensor& input_gates, const torch::Tensor& hidden_gates,
                                  const torch::Tensor& hidden);

  torch::Tensor weight_hh;  // [3H, H]
  torch::Tensor bias_hh;    // [3H]
};
TORCH_MODULE(GruCell);

}  // namespace nmt
