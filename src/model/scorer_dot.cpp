// Dot attention: score(s, h_j) = s^T h_j. Luong et al. 2015, eq. 8.
//
// Sizes: the query is the decoder state (Q = H_d) and the keys are encoder states (C = 2 H_e
// for the bidirectional encoder). When Q == C the keys are the encoder states themselves, with no
// parameters: the pure dot product. When they differ, a dot product is undefined, so the states
// are first mapped to size Q by one learned bias-free matrix, computed once per batch; that makes
// the scorer identical in form to `general`. Configure decoder-hidden-size = 2 * encoder-hidden-size
// to compare the pure dot scorer.
#include <torch/torch.h>

#include "model/scorers.h"

namespace nmt {

DotScorerImpl::DotScorerImpl(const AttentionOptions& options) {
  if (options.key_size != options.query_size) {
    key_map = register_module(
        "key_map", torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)));
  }
}

torch::Tensor DotScorerImpl::project_keys(const torch::Tensor& states) {
  return key_map ? key_map(states) : states;  // [B, S, Q]
}

torch::Tensor DotScorerImpl::score(const torch::Tensor& query, const torch::Tensor& keys) {
  return batched_matvec(keys, query);  // [B, S, Q] . [B, Q] -> [B, S]
}

}  // namespace nmt
