// General (bilinear) attention: score(s, h_j) = s^T W h_j. Luong et al. 2015, eq. 8.
// W h_j is the key, computed once per batch; each step is then one batched dot product.
#include <torch/torch.h>

#include "model/linear/bf16_products.h"
#include "model/scorers/registry.h"

namespace nmt {
namespace {

class GeneralScorerImpl : public ScorerImpl {
 public:
  explicit GeneralScorerImpl(const AttentionOptions& options)
      : key_layer_(register_module(
            "key_layer",
            torch::nn::Linear(torch::nn::LinearOptions(options.key_size, options.query_size).bias(false)))) {}

  torch::Tensor project_keys(const torch::Tensor& states) override {
    return training_linear(states, key_layer_->weight, key_layer_->bias);  // [B, S, Q]
  }
  KeyMap key_map() const override { return {key_layer_->weight, key_layer_->bias}; }

  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep&) override {
    return batched_matvec(keys, query);  // [B, S]
  }

 private:
  torch::nn::Linear key_layer_;  // W: C -> Q
};

}  // namespace

ScorerEntry general_scorer_entry() {
  return {"general", "s^T W h_j, Luong et al. 2015, eq. 8",
          [](const AttentionOptions& options) { return std::make_shared<GeneralScorerImpl>(options); },
          [](const AttentionOptions& options) {
            const auto query = static_cast<double>(options.query_size);
            return ScorerArithmetic{static_cast<double>(options.key_size) * query, 0.0, query};
          }};
}

}  // namespace nmt
