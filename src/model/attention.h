// Attention: a scorer compares the decoder state with every encoder state; the masked softmax
// turns scores into weights and the weights mix the encoder states into a context vector.
//
// Scorers (one file each in model/scorers/, found by name in model/scorers/registry.h):
//   additive    scorers/additive.cpp    v^T tanh(W s + U h_j)       Bahdanau et al. 2015, eq. 6 / A.1.2
//               with coverage = true:   v^T tanh(W s + U h_j + u c_j), c_j the sum of earlier
//                                       weights of position j       Tu et al. 2016, eq. 6 and 9
//   dot         scorers/dot.cpp         s^T h_j                     Luong et al. 2015, eq. 8
//   scaled-dot  scorers/scaled_dot.cpp  s^T h_j / sqrt(Q)           Vaswani et al. 2017, eq. 1
//   general     scorers/general.cpp     s^T W h_j                   Luong et al. 2015, eq. 8
//   cosine      scorers/cosine.cpp      beta * cos(s, h_j)          Graves et al. 2014, eq. 5-6
//   location    scorers/location.cpp    (W s)_j, positions only     Luong et al. 2015, eq. 8
//   local-p     scorers/local.cpp       a content scorer in a window around a predicted position,
//   local-m                             times a Gaussian (local-m: the position is t)
//                                                                   Luong et al. 2015, section 3.2
//   multi-head  scorers/multi_head.cpp  additive per head over slices of the keys and states,
//                                       contexts concatenated       Chen et al. 2018 (RNMT+)
//   none        (no scorer)             a fixed context, the encoder's summary (Cho et al. 2014)
//
// Shapes: B batch, S source length, Q query (decoder) size, C encoder state size (2 H_e),
// K key size, N heads.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <utility>

#include "model/encoded_source.h"
#include "model/options.h"

namespace nmt {

// The parameters of a scorer of the additive form v^T tanh(W q + k_j + u c_j) (u c_j with
// coverage only), which the decoder's fused training loop (fused_cpu/decoder_pass.h) runs without calling
// the scorer.
struct AdditiveForm {
  torch::Tensor query_weight;  // W [A, Q]
  torch::Tensor energy;        // v [A]
  torch::Tensor coverage;      // u [A]; undefined without coverage
  int64_t heads = 1;           // N heads over slices of A / N (multi-head): v_n^T tanh(W_n q + k_jn)
};

// What a scorer may read at one decoder step besides the query and the source.
struct AttentionStep {
  int64_t position = 0;     // the target position t (0-based): local-m's aligned source position
  torch::Tensor coverage;   // [B, S] the sum of the earlier steps' weights; defined for uses_coverage()
  torch::Tensor projected;  // [B, P] W s, the scorer's query_weight() applied to the query (filled in
                            // by AttentionImpl::forward, or by the fused training loop's own product)
  torch::Tensor mask;       // [B, S] the source's real positions (AttentionImpl::forward), for scorers
                            // that skip the padding (its scores are then masked out anyway)
};

// The attention weights over source positions from scores [B, S] (or [B, N, S]): a softmax over
// the real positions of `mask` [B, S]; exactly 0 on padding.
torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& mask);

class ScorerImpl : public torch::nn::Module {
 public:
  // Keys from encoder states [B, S, C] -> [B, S, K]; called once per batch, never per step. Each
  // position's key is made from its own state alone (inference projects the real positions only:
  // Seq2SeqImpl::encode).
  virtual torch::Tensor project_keys(const torch::Tensor& states) = 0;
  // W [K, C] and b [K] (or undefined) when project_keys() is the linear map states W^T + b and
  // nothing more (additive, multi-head, general, dot with a key map, local-p's and local-m's
  // content scorer), else an undefined W. Translation then makes the keys with its own prepared
  // copy of the map (DecoderImpl::quantize_int8, pack_float32).
  struct KeyMap {
    torch::Tensor weight, bias;
  };
  virtual KeyMap key_map() const { return {}; }
  // Unnormalised scores of query [B, Q] against keys [B, S, K] -> [B, S] ([B, N, S] with heads).
  virtual torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep& step) = 0;
  // The weights [B, S] ([B, N, S] with heads): by default the masked softmax of score().
  virtual torch::Tensor attend(const torch::Tensor& query, const EncodedSource& source, const AttentionStep& step) {
    return masked_softmax(score(query, source.keys, step), source.mask);
  }
  // W [P, Q] of a scorer that first maps the query by a bias-free linear map (W s of additive,
  // multi-head, location, local-p), or undefined. Its score() (local-p: its attend()) then reads
  // AttentionStep::projected instead of computing W s, so that the fused training loop can run W s
  // as one of its packed products; call it through AttentionImpl::forward, which fills it in.
  virtual torch::Tensor query_weight() const { return {}; }
  // Heads N: each mixes its slice of C / N columns of the encoder states (multi-head), else 1.
  virtual int64_t heads() const { return 1; }
  // Whether score() reads AttentionStep::coverage (the decoder then carries it in its state).
  virtual bool uses_coverage() const { return false; }
  // Whether scores depend on AttentionStep::position (local-m).
  virtual bool uses_position() const { return false; }
  // W, v (u, heads) for a scorer of the additive form, which the fused training loop runs on its
  // own kernels; nothing for the others (the loop then calls AttentionImpl::forward per step).
  virtual std::optional<AdditiveForm> additive_form() const { return std::nullopt; }
};

// W s for a scorer with a query_weight() (AttentionStep::projected), else undefined.
torch::Tensor project_query(const ScorerImpl& scorer, const torch::Tensor& query);

// The scorer named options.scorer (model/scorers/registry.h), or null for kNoAttention.
std::shared_ptr<ScorerImpl> make_scorer(const AttentionOptions& options);

// Row-wise products of a batch of matrices with a batch of vectors: matrices [B, S, K], vectors
// [B, K] -> [B, S]. LibTorch 1.13's CPU bmm runs one BLAS call per batch row for shapes like these
// (tens of thousands of tiny calls per training step, forward and backward); a broadcast multiply
// and a sum is one pass over the data, and its result does not depend on the batch.
torch::Tensor batched_matvec(const torch::Tensor& matrices, const torch::Tensor& vectors);

struct AttentionResult {
  torch::Tensor context;       // [B, C]
  torch::Tensor weights;       // [B, S] (the mean over heads), exactly 0 on padding; rows sum to 1
                               // except local-p and local-m (their Gaussian); undefined for `none`
  torch::Tensor head_weights;  // [B, N, S] each head's weights; undefined with one head
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionOptions& options);

  // Keys for EncodedSource::keys (undefined when there is no scorer).
  torch::Tensor project_keys(const torch::Tensor& states);
  // query [B, Q] -> context and weights.
  AttentionResult forward(const torch::Tensor& query, const EncodedSource& source, const AttentionStep& step = {});

  bool has_scorer() const { return scorer_ != nullptr; }
  bool uses_coverage() const { return scorer_ && scorer_->uses_coverage(); }
  bool uses_position() const { return scorer_ && scorer_->uses_position(); }
  // The scorer's query_weight(), or undefined.
  torch::Tensor query_weight() const { return scorer_ ? scorer_->query_weight() : torch::Tensor(); }
  // The scorer's key_map(), or none.
  ScorerImpl::KeyMap key_map() const { return scorer_ ? scorer_->key_map() : ScorerImpl::KeyMap{}; }
  // The scorer's additive form (ScorerImpl::additive_form), or nothing.
  std::optional<AdditiveForm> additive_form() const { return scorer_ ? scorer_->additive_form() : std::nullopt; }

 private:
  std::shared_ptr<ScorerImpl> scorer_;  // null for kNoAttention
};
TORCH_MODULE(Attention);

}  // namespace nmt
