#include "model/gru_cell.h"

#include <torch/torch.h>

#include <cmath>

namespace nmt {

GruCellImpl::GruCellImpl(int64_t hidden_size) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));  // as torch::nn::GRU
  weight_hh = register_parameter("weight_hh", torch::empty({3 * hidden_size, hidden_size}).uniform_(-bound, bound));
  bias_hh = register_parameter("bias_hh", torch::empty({3 * hidden_size}).uniform_(-bound, bound));
}

torch::Tensor GruCellImpl::from_gates(const torch::Tensor& input_gates, const torch::Tensor& hidden_gates,
                                      const torch::Tensor& hidden) {
  auto input_parts = input_gates.chunk(3, /*dim=*/1);
  auto hidden_parts = hidden_gates.chunk(3, /*dim=*/1);
  torch::Tensor reset = torch::sigmoid(input_parts[0] + hidden_parts[0]);
  torch::Tensor update = torch::sigmoid(input_parts[1] + hidden_parts[1]);
  torch::Tensor candidate = torch::tanh(input_parts[2] + reset * hidden_parts[2]);
  return candidate + update * (hidden - candidate);  // = (1 - z) * n + z * h
}

}  // namespace nmt
