// Cosine (content-based) attention: score(s, h_j) = beta * cos(s, h_j).
// Graves, Wayne and Danihelka 2014 (Neural Turing Machines), eq. 5-6: the key strength beta
// sharpens the distribution; a plain cosine in [-1, 1] would give a near-uniform softmax over
// long sources. beta is fixed when cosine-sharpness > 0, otherwise learned (as log beta, so it
// stays positive), starting at 10.
//
// Sizes: as for `dot`, keys are the encoder states when their size equals the query's, and
// otherwise pass through one learned bias-free map to the query size. The normalised keys are
// computed once per batch.
#include <torch/torch.h>

#include <cmath>

#include "model/scorers.h"

namespace nmt {

namespace {
constexpr double kInitialSharpness = 10.0;
constexpr double kNormEpsilon = 1e-6;  // avoids 0/0 for an all-zero vector
}  // namespace

CosineScorerImpl::CosineScorerImpl(const AttentionOptions& options) : fixed_sharpness(options.cosine_sharpness) {
  if (options.key_size != options.query_size) {
    key_map = register_module(
        "key_map", torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)));
  }
  if (fixed_sharpness <= 0) {
    log_sharpness = register_parameter("log_sharpness", torch::full({1}, std::log(kInitialSharpness)));
  }
}

torch::Tensor CosineScorerImpl::project_keys(const torch::Tensor& states) {
  torch::Tensor keys = key_map ? key_map(states) : states;  // [B, S, Q]
  return keys / keys.norm(2, /*dim=*/{2}, /*keepdim=*/true).clamp_min(kNormEpsilon);
}

torch::Tensor CosineScorerImpl::score(const torch::Tensor& query, const torch::Tensor& keys) {
  torch::Tensor unit_query = query / query.norm(2, /*dim=*/{1}, /*keepdim=*/true).clamp_min(kNormEpsilon);
  torch::Tensor cosine = batched_matvec(keys, unit_query);  // [B, S] in [-1, 1]
  return log_sharpness.defined() ? cosine * log_sharpness.exp() : cosine * fixed_sharpness;
}

}  // namespace nmt
