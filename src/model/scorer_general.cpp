// General (bilinear) attention: score(s, h_j) = s^T W h_j. Luong et al. 2015, eq. 8.
// W h_j is the key, computed once per batch; each step is then one batched dot product.
#include <torch/torch.h>

#include "model/scorers.h"

namespace nmt {

GeneralScorerImpl::GeneralScorerImpl(const AttentionOptions& options)
    : key_layer(register_module(
          "key_layer", torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)))) {}

torch::Tensor GeneralScorerImpl::project_keys(const torch::Tensor& states) {
  return key_layer(states);  // [B, S, Q]
}

torch::Tensor GeneralScorerImpl::score(const torch::Tensor& query, const torch::Tensor& keys) {
  return batched_matvec(keys, query);  // [B, S]
}

}  // namespace nmt
