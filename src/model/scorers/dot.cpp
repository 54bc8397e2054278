// Dot attention: score(s, h_j) = s^T h_j. Luong et al. 2015, eq. 8. The module (dot.h) is shared
// with scaled-dot.
#include "model/scorers/dot.h"

#include <torch/torch.h>

#include "model/linear/bf16_products.h"
#include "model/scorers/registry.h"

namespace nmt {

DotScorerImpl::DotScorerImpl(const AttentionOptions& options, double scale) : scale_(scale) {
  if (options.key_size != options.query_size) {
    key_map_ = register_module(
        "key_map", torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)));
  }
}

torch::Tensor DotScorerImpl::project_keys(const torch::Tensor& states) {
  return key_map_ ? training_linear(states, key_map_->weight, key_map_->bias) : states;  // [B, S, Q]
}

torch::Tensor DotScorerImpl::score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep&) {
  const torch::Tensor scores = batched_matvec(keys, query);  // [B, S, Q] . [B, Q] -> [B, S]
  return scale_ == 1.0 ? scores : scores * scale_;
}

ScorerEntry dot_scorer_entry() {
  return {"dot", "s^T h_j, Luong et al. 2015, eq. 8",
          [](const AttentionOptions& options) { return std::make_shared<DotScorerImpl>(options, 1.0); },
          state_key_arithmetic};
}

}  // namespace nmt
