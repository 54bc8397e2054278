// The training loss: label-smoothed cross-entropy over the real (non-pad) target positions.
//
// Only those positions go through the output layer (about 1 in 7 positions of a Multi30k batch
// is padding), and the loss and its gradient are computed in one fused function: the gradient
// with respect to the logits is softmax(z) - q, with q the smoothed target distribution
// (1 - eps) * onehot(y) + eps / V, the same definition as PyTorch's cross_entropy(label_smoothing).
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "model/decoder.h"

namespace nmt {

// Sum over the rows of logits [N, V] of -sum_v q_v log softmax(z)_v, targets [N].
torch::Tensor smoothed_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets, double epsilon);

// The output layer and the loss together: smoothed_cross_entropy_sum(hidden W^T + b, targets),
// hidden [N, H], weight [V, H], bias [V] (or undefined), targets [N]. On CPUs with AVX2 (float32)
// it runs as one fused function (kernels/row_kernels.h) that never keeps logits and
// log-probabilities side by side; elsewhere it is exactly that composition of LibTorch ops.
torch::Tensor output_layer_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                                const torch::Tensor& targets, double epsilon);

struct SequenceLoss {
  torch::Tensor sum;  // scalar: the summed loss of the target tokens (positions that are not padding)
};

// The loss of a teacher-forced pass: decoder output [B, T, H] against target_output [B, T].
SequenceLoss sequence_loss(DecoderImpl& decoder, const DecoderOutput& output, const torch::Tensor& target_output,
                           double epsilon);

}  // namespace nmt
