// Attention: a scorer compares the decoder state with every encoder state; the masked softmax
// turns scores into weights and the weights mix the encoder states into a context vector.
//
// Scorers (one file each, chosen by AttentionType in make_scorer):
//   additive  scorer_additive.cpp  v^T tanh(W s + U h)      Bahdanau et al. 2015, eq. 6 / A.1.2
//   dot       scorer_dot.cpp       s^T h                    Luong et al. 2015, eq. 8
//   general   scorer_general.cpp   s^T W h                  Luong et al. 2015, eq. 8
//   cosine    scorer_cosine.cpp    beta * cos(s, h)         Graves et al. 2014, eq. 5-6
//   none      (no scorer)          a fixed context, the encoder's summary (Cho et al. 2014)
//
// Shapes: B batch, S source length, Q query (decoder) size, C encoder state size (2 H_e),
// K key size.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <utility>

#include "model/encoded_source.h"
#include "model/options.h"

namespace nmt {

class ScorerImpl : public torch::nn::Module {
 public:
  // Keys from encoder states [B, S, C] -> [B, S, K]; called once per batch, never per step.
  virtual torch::Tensor project_keys(const torch::Tensor& states) = 0;
  // Unnormalised scores of query [B, Q] against keys [B, S, K] -> [B, S].
  virtual torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) = 0;
};

std::shared_ptr<ScorerImpl> make_scorer(const AttentionOptions& options);

// Row-wise products of a batch of matrices with a batch of vectors: matrices [B, S, K], vectors
// [B, K] -> [B, S]. LibTorch 1.13's CPU bmm runs one BLAS call per batch row for shapes like these
// (tens of thousands of tiny calls per training step, forward and backward); a broadcast multiply
// and a sum is one pass over the data, and its result does not depend on the batch.
torch::Tensor batched_matvec(const torch::Tensor& matrices, const torch::Tensor& vectors);

struct AttentionResult {
  torch::Tensor context;  // [B, C]
  torch::Tensor weights;  // [B, S], rows sum to 1, exactly 0 on padding; undefined for `none`
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionOptions& options);

  // Keys for EncodedSource::keys (undefined when there is no scorer).
  torch::Tensor project_keys(const torch::Tensor& states);
  // query [B, Q] -> context and weights.
  AttentionResult forward(const torch::Tensor& query, const EncodedSource& source);

  bool has_scorer() const { return scorer_ != nullptr; }
  const std::shared_ptr<ScorerImpl>& scorer() const { return scorer_; }

 private:
  std::shared_ptr<ScorerImpl> scorer_;  // null for AttentionType::kNone
};
TORCH_MODULE(Attention);

}  // namespace nmt
