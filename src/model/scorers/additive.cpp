// Additive (concat) attention: score(s, h_j) = v^T tanh(W s + U h_j).
// Bahdanau et al. 2015, eq. 6 and appendix A.1.2. U h_j does not depend on the decoder step, so
// it is the key, computed once per batch (as the paper notes in A.1.2).
#include <torch/torch.h>

#include "model/fused_attention.h"
#include "model/scorers/registry.h"

namespace nmt {
namespace {

class AdditiveScorerImpl : public ScorerImpl {
 public:
  explicit AdditiveScorerImpl(const AttentionOptions& options)
      : query_layer_(register_module(
            "query_layer",
            torch::nn::Linear(torch::nn::LinearOptions(options.query_size, options.attention_size).bias(false)))),
        key_layer_(register_module("key_layer", torch::nn::Linear(options.key_size, options.attention_size))),
        energy_layer_(register_module(
            "energy_layer", torch::nn::Linear(torch::nn::LinearOptions(options.attention_size, 1).bias(false)))) {}

  torch::Tensor project_keys(const torch::Tensor& states) override {
    return key_layer_(states);  // [B, S, A]
  }

  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) override {
    // v^T tanh(W s + k_j) for every j in one pass over the keys (model/fused_attention.h).
    return additive_energy(keys, query_layer_(query), energy_layer_->weight.squeeze(0));  // [B, S]
  }

  std::optional<AdditiveForm> additive_form() const override {
    return AdditiveForm{query_layer_->weight, energy_layer_->weight.squeeze(0)};
  }

 private:
  torch::nn::Linear query_layer_;   // W: Q -> A
  torch::nn::Linear key_layer_;     // U: C -> A
  torch::nn::Linear energy_layer_;  // v: A -> 1
};

}  // namespace

ScorerEntry additive_scorer_entry() {
  return {"additive", "v^T tanh(W s + U h_j), Bahdanau et al. 2015, eq. 6",
          [](const AttentionOptions& options) { return std::make_shared<AdditiveScorerImpl>(options); },
          [](const AttentionOptions& options) {
            const auto attention = static_cast<double>(options.attention_size);
            return ScorerArithmetic{static_cast<double>(options.key_size) * attention,
                                    static_cast<double>(options.query_size) * attention, attention};
          }};
}

}  // namespace nmt
