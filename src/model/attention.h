// Attention: a scorer compares the decoder state with every encoder state; the masked softmax
// turns scores into weights and the weights mix the encoder states into a context vector.
//
// Scorers (one file each in model/scorers/, found by name in model/scorers/registry.h):
//   additive  scorers/additive.cpp  v^T tanh(W s + U h)   Bahdanau et al. 2015, eq. 6 / A.1.2
//   dot       scorers/dot.cpp       s^T h                 Luong et al. 2015, eq. 8
//   general   scorers/general.cpp   s^T W h               Luong et al. 2015, eq. 8
//   cosine    scorers/cosine.cpp    beta * cos(s, h)      Graves et al. 2014, eq. 5-6
//   none      (no scorer)           a fixed context, the encoder's summary (Cho et al. 2014)
//
// Shapes: B batch, S source length, Q query (decoder) size, C encoder state size (2 H_e),
// K key size.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <utility>

#include "model/encoded_source.h"
#include "model/options.h"

namespace nmt {

// The parameters of a scorer of the additive form v^T tanh(W q + k_j), which the decoder's fused
// training loop (decoder_fused.h) runs without calling the scorer.
struct AdditiveForm {
  torch::Tensor query_weight;  // W [A, Q]
  torch::Tensor energy;        // v [A]
};

class ScorerImpl : public torch::nn::Module {
 public:
  // Keys from encoder states [B, S, C] -> [B, S, K]; called once per batch, never per step.
  virtual torch::Tensor project_keys(const torch::Tensor& states) = 0;
  // Unnormalised scores of query [B, Q] against keys [B, S, K] -> [B, S].
  virtual torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) = 0;
  // W and v for a scorer of the additive form; nothing for the others (the decoder then takes
  // its per-step path).
  virtual std::optional<AdditiveForm> additive_form() const { return std::nullopt; }
};

// The scorer named options.scorer (model/scorers/registry.h), or null for kNoAttention.
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
  // The scorer's additive form (ScorerImpl::additive_form), or nothing.
  std::optional<AdditiveForm> additive_form() const { return scorer_ ? scorer_->additive_form() : std::nullopt; }

 private:
  std::shared_ptr<ScorerImpl> scorer_;  // null for kNoAttention
};
TORCH_MODULE(Attention);

}  // namespace nmt
