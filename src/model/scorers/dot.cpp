// Dot attention: score(s, h_j) = s^T h_j. Luong et al. 2015, eq. 8.
//
// Sizes: the query is the decoder state (Q = H_d) and the keys are encoder states (C = 2 H_e
// for the bidirectional encoder). When Q == C the keys are the encoder states themselves, with no
// parameters: the pure dot product. When they differ, a dot product is undefined, so the states
// are first mapped to size Q by one learned bias-free matrix, computed once per batch; that makes
// the scorer identical in form to `general`. Configure decoder-hidden-size = 2 * encoder-hidden-size
// to compare the pure dot scorer.
#include <torch/torch.h>

#include "model/scorers/registry.h"

namespace nmt {
namespace {

class DotScorerImpl : public ScorerImpl {
 public:
  explicit DotScorerImpl(const AttentionOptions& options) {
    if (options.key_size != options.query_size) {
      key_map_ = register_module(
          "key_map", torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)));
    }
  }

  torch::Tensor project_keys(const torch::Tensor& states) override {
    return key_map_ ? key_map_(states) : states;  // [B, S, Q]
  }

  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) override {
    return batched_matvec(keys, query);  // [B, S, Q] . [B, Q] -> [B, S]
  }

 private:
  torch::nn::Linear key_map_{nullptr};  // C -> Q, only when C != Q
};

}  // namespace

ScorerEntry dot_scorer_entry() {
  return {"dot", "s^T h_j, Luong et al. 2015, eq. 8",
          [](const AttentionOptions& options) { return std::make_shared<DotScorerImpl>(options); },
          state_key_arithmetic};
}

}  // namespace nmt
