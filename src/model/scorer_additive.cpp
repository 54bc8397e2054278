// Additive (concat) attention: score(s, h_j) = v^T tanh(W s + U h_j).
// Bahdanau et al. 2015, eq. 6 and appendix A.1.2. U h_j does not depend on the decoder step, so
// it is the key, computed once per batch (as the paper notes in A.1.2).
#include <torch/torch.h>

#include "model/fused_attention.h"
#include "model/scorers.h"

namespace nmt {

AdditiveScorerImpl::AdditiveScorerImpl(const AttentionOptions& options)
    : query_layer(register_module("query_layer",
                                  torch::nn::Linear(torch::nn::LinearOptions(options.query_size, options.attention_size).bias(false)))),
      key_layer(register_module("key_layer", torch::nn::Linear(options.key_size, options.attention_size))),
      energy_layer(register_module("energy_layer",
                                   torch::nn::Linear(torch::nn::LinearOptions(options.attention_size, 1).bias(false)))) {}

torch::Tensor AdditiveScorerImpl::project_keys(const torch::Tensor& states) {
  return key_layer(states);  // [B, S, A]
}

torch::Tensor AdditiveScorerImpl::score(const torch::Tensor& query, const torch::Tensor& keys) {
  // v^T tanh(W s + k_j) for every j in one pass over the keys (model/fused_attention.h).
  return additive_energy(keys, query_layer(query), energy_layer->weight.squeeze(0));  // [B, S]
}

}  // namespace nmt
