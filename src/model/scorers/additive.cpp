// Additive (concat) attention: score(s, h_j) = v^T tanh(W s + U h_j).
// Bahdanau et al. 2015, eq. 6 and appendix A.1.2. U h_j does not depend on the decoder step, so
// it is the key, computed once per batch (as the paper notes in A.1.2).
//
// With coverage = true: score(s, h_j) = v^T tanh(W s + U h_j + u c_j), where c_j is the coverage
// of source position j, the sum of its weights at the earlier steps (Tu et al. 2016, "Modeling
// Coverage for Neural Machine Translation", eq. 6 with the linguistic coverage of eq. 9 without
// fertility). It tells the scorer what has been attended already, against repeating and dropping
// source words. The decoder carries c in its state (DecoderState::coverage).
#include <torch/torch.h>

#include "model/linear/bf16_products.h"
#include "model/ops/attention_products.h"
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
            "energy_layer", torch::nn::Linear(torch::nn::LinearOptions(options.attention_size, 1).bias(false)))) {
    if (options.coverage) {
      coverage_layer_ = register_module(
          "coverage_layer", torch::nn::Linear(torch::nn::LinearOptions(1, options.attention_size).bias(false)));
    }
  }

  torch::Tensor project_keys(const torch::Tensor& states) override {
    return training_linear(states, key_layer_->weight, key_layer_->bias);  // [B, S, A]
  }

  torch::Tensor score(const torch::Tensor&, const torch::Tensor& keys, const AttentionStep& step) override {
    const torch::Tensor energy = energy_layer_->weight.squeeze(0);  // [A]
    if (!coverage_layer_) {
      // v^T tanh(W s + k_j) for every j in one pass over the keys (model/ops/attention_products.h).
      return additive_energy(keys, step.projected, energy, 1, step.mask);  // [B, S]
    }
    // The coverage term joins the keys (one more pass over [B, S, A]), then the same fused energy.
    const torch::Tensor covered = torch::addcmul(keys, step.coverage.unsqueeze(2), coverage_layer_->weight.squeeze(1));
    return additive_energy(covered, step.projected, energy, 1, step.mask);  // [B, S]
  }

  torch::Tensor query_weight() const override { return query_layer_->weight; }
  KeyMap key_map() const override { return {key_layer_->weight, key_layer_->bias}; }

  bool uses_coverage() const override { return static_cast<bool>(coverage_layer_); }

  std::optional<AdditiveForm> additive_form() const override {
    return AdditiveForm{query_layer_->weight, energy_layer_->weight.squeeze(0),
                        coverage_layer_ ? coverage_layer_->weight.squeeze(1) : torch::Tensor()};
  }

 private:
  torch::nn::Linear query_layer_;              // W: Q -> A
  torch::nn::Linear key_layer_;                // U: C -> A
  torch::nn::Linear energy_layer_;             // v: A -> 1
  torch::nn::Linear coverage_layer_{nullptr};  // u: 1 -> A, only with coverage
};

}  // namespace

ScorerEntry additive_scorer_entry() {
  return {"additive", "v^T tanh(W s + U h_j), Bahdanau et al. 2015, eq. 6",
          [](const AttentionOptions& options) { return std::make_shared<AdditiveScorerImpl>(options); },
          additive_arithmetic};
}

}  // namespace nmt
