// Both directions of one BiGru layer's recurrent loop as one autograd function, the two directions
// running side by side on two threads (forward and backward pass), each step's element-wise work
// in the GRU kernel of kernels/gru_kernels.h.
//
// The recurrent products are small (about 60 x 256 by 256 x 768): two threads on one of them reach
// about half the machine's matrix-multiply rate, one thread on each of two reaches nearly all of
// it. LibTorch's autograd runs a backward pass on one thread, so only a function that does its
// own backward can run the two directions' backward loops at once. Same results as
// BiGruImpl::run() for each direction (tests/test_model.cpp compares it with torch::nn::GRU).
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/bigru.h"  // HiddenGates

namespace nmt {

// For tensors the kernels take (kernels::use_kernel, kernels/dispatch.h).
// input_gates [2][S, B, 3H] (forward, backward direction; W_i x + b_i), weight_hh [2][3H, H],
// bias_hh [2][3H], mask [S, B, 1] float (1 at real positions), first_padded = the shortest length.
// Returns {forward states [S, B, H], backward states [S, B, H], forward final [B, H], backward
// final [B, H]}, as BiGruImpl::run() defines them.
std::array<torch::Tensor, 4> fused_bigru_layer(const std::array<torch::Tensor, 2>& input_gates,
                                               const std::array<torch::Tensor, 2>& weight_hh,
                                               const std::array<torch::Tensor, 2>& bias_hh, const torch::Tensor& mask,
                                               int64_t first_padded);

// A batch packed as cuDNN packs one: its sentences in order of decreasing length, and position
// after position the rows of the sentences that are longer than it, so that no row is padding.
struct PackedPositions {
  std::vector<int64_t> rows;    // rows[t]: the sentences longer than t (never increasing), rows[0] = B
  std::vector<int64_t> offset;  // offset[t]: the packed row of position t's first sentence
  int64_t total = 0;            // the packed rows: the real positions of the batch
};

// Inference alone (nothing kept for a backward) over a packed batch: each step multiplies only
// the rows of the sentences still running, so a batch of mixed lengths costs what its real
// positions cost. The same states as fused_bigru_layer at the real positions.
// input_gates [2][N, 3H] packed rows (forward, backward direction); hidden_gates [2], each
// direction's product. Returns {forward states [N, H], backward states [N, H], forward final
// [B, H], backward final [B, H]}, the finals in the packed order of the sentences.
std::array<torch::Tensor, 4> packed_bigru_layer(const std::array<torch::Tensor, 2>& input_gates,
                                                const std::array<HiddenGates, 2>& hidden_gates,
                                                const PackedPositions& positions);

}  // namespace nmt
