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

#include "model/scorers/registry.h"

namespace nmt {
namespace {

constexpr double kInitialSharpness = 10.0;
constexpr double kNormEpsilon = 1e-6;  // avoids 0/0 for an all-zero vector

class CosineScorerImpl : public ScorerImpl {
 public:
  explicit CosineScorerImpl(const AttentionOptions& options) : fixed_sharpness_(options.cosine_sharpness) {
    if (options.key_size != options.query_size) {
      key_map_ = register_module(
          "key_map", torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)));
    }
    if (fixed_sharpness_ <= 0) {
      log_sharpness_ = register_parameter("log_sharpness", torch::full({1}, std::log(kInitialSharpness)));
    }
  }

  torch::Tensor project_keys(const torch::Tensor& states) override {
    torch::Tensor keys = key_map_ ? key_map_(states) : states;  // [B, S, Q]
    return keys / keys.norm(2, /*dim=*/{2}, /*keepdim=*/true).clamp_min(kNormEpsilon);
  }

  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep&) override {
    torch::Tensor unit_query = query / query.norm(2, /*dim=*/{1}, /*keepdim=*/true).clamp_min(kNormEpsilon);
    torch::Tensor cosine = batched_matvec(keys, unit_query);  // [B, S] in [-1, 1]
    return log_sharpness_.defined() ? cosine * log_sharpness_.exp() : cosine * fixed_sharpness_;
  }

 private:
  torch::nn::Linear key_map_{nullptr};  // C -> Q, only when C != Q
  torch::Tensor log_sharpness_;         // learned log beta, or undefined when fixed
  double fixed_sharpness_;
};

}  // namespace

ScorerEntry cosine_scorer_entry() {
  return {"cosine", "beta * cos(s, h_j), Graves et al. 2014, eq. 5-6",
          [](const AttentionOptions& options) { return std::make_shared<CosineScorerImpl>(options); },
          state_key_arithmetic};
}

}  // namespace nmt
