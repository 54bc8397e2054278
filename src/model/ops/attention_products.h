// The two per-step attention computations that dominate its cost, as single autograd functions
// over the AVX2 kernels of kernels/attention_kernels.h. On other CPUs, devices or types they are
// exactly the LibTorch expressions written next to each, so the model's maths does not depend on
// which runs.
#pragma once

#include <torch/types.h>

namespace nmt {

// v^T tanh(keys + query) at every source position: keys [B, S, A], query [B, A], v [A] -> [B, S].
// = torch::matmul(torch::tanh(keys + query.unsqueeze(1)), v)
// With heads > 1 (dividing A), each head's sum over its A / heads slice: -> [B, S, heads].
// = (torch::tanh(keys + query.unsqueeze(1)) * v).view({B, S, heads, A / heads}).sum(3)
// mask [B, S] bool, or undefined: in inference with the kernels, the positions where it is false
// (padding, which a masked softmax then discards) are not computed and score 0; elsewhere they are.
torch::Tensor additive_energy(const torch::Tensor& keys, const torch::Tensor& query, const torch::Tensor& v,
                              int64_t heads = 1, const torch::Tensor& mask = {});

// sum_s weights[b, s] states[b, s]: weights [B, S], states [B, S, C] -> [B, C].
// = (weights.unsqueeze(2) * states).sum(1)
torch::Tensor weighted_sum(const torch::Tensor& weights, const torch::Tensor& states);

}  // namespace nmt
