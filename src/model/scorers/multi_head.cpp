// Multi-head additive attention (Chen et al. 2018, "The Best of Both Worlds", RNMT+, section 3.2;
// the heads of Vaswani et al. 2017, section 3.2.2, on the additive scorer). The A columns of the
// query and key projections are cut into N slices of A/N; head n scores with its slice,
//   e_nj = v_n^T tanh(W_n s + U_n h_j),
// normalises over the source positions on its own, and mixes its own slice of C/N columns of the
// encoder states; the N contexts, concatenated, make the C-sized context. So the heads can look at
// different positions for different parts of the context, for the parameters of one additive
// scorer. The values are the states' slices as they are (no value projection), so the context
// keeps the size the decoder's combine layer takes. Heatmaps show the mean of the heads' weights.
#include <torch/torch.h>

#include "model/linear/bf16_products.h"
#include "model/ops/attention_products.h"
#include "model/scorers/registry.h"

namespace nmt {
namespace {

class MultiHeadScorerImpl : public ScorerImpl {
 public:
  explicit MultiHeadScorerImpl(const AttentionOptions& options)
      : query_layer_(register_module(
            "query_layer",
            torch::nn::Linear(torch::nn::LinearOptions(options.query_size, options.attention_size).bias(false)))),
        key_layer_(register_module("key_layer", torch::nn::Linear(options.key_size, options.attention_size))),
        energy_layer_(register_module(
            "energy_layer", torch::nn::Linear(torch::nn::LinearOptions(options.attention_size, 1).bias(false)))),
        heads_(options.heads) {
    TORCH_CHECK(options.attention_size % heads_ == 0 && options.key_size % heads_ == 0,
                "multi-head attention: attention-heads must divide attention-size and the encoder states' size");
  }

  torch::Tensor project_keys(const torch::Tensor& states) override {
    return training_linear(states, key_layer_->weight, key_layer_->bias);  // [B, S, A]
  }

  torch::Tensor score(const torch::Tensor&, const torch::Tensor& keys, const AttentionStep& step) override {
    // Each head's energy in one pass over the keys (model/ops/attention_products.h).
    return additive_energy(keys, step.projected, energy_layer_->weight.squeeze(0), heads_, step.mask).transpose(1, 2);
  }

  torch::Tensor query_weight() const override { return query_layer_->weight; }
  KeyMap key_map() const override { return {key_layer_->weight, key_layer_->bias}; }
  int64_t heads() const override { return heads_; }

  std::optional<AdditiveForm> additive_form() const override {
    return AdditiveForm{query_layer_->weight, energy_layer_->weight.squeeze(0), torch::Tensor(), heads_};
  }

 private:
  torch::nn::Linear query_layer_;   // W: Q -> A, N slices
  torch::nn::Linear key_layer_;     // U: C -> A, N slices
  torch::nn::Linear energy_layer_;  // v: A -> 1, N slices
  int64_t heads_;
};

}  // namespace

ScorerEntry multi_head_scorer_entry() {
  return {"multi-head", "v_n^T tanh(W_n s + U_n h_j) per head n over slices, Chen et al. 2018",
          [](const AttentionOptions& options) { return std::make_shared<MultiHeadScorerImpl>(options); },
          additive_arithmetic, /*content=*/false};
}

}  // namespace nmt
