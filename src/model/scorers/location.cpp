// Location-based attention: a_t = softmax(W s_t), Luong et al. 2015, eq. 8 ("location"). The
// scores come from the decoder state alone: row j of W scores source position j whatever it
// holds, so the scorer learns where to look at step t from the state, never what is there.
//
// W has one row per source position up to attention-positions (default 100, beyond the training
// length filter); positions past it share the last row's score. The keys are the encoder states
// as they are (no parameters, no copy): the scorer reads only their number of positions.
#include <torch/torch.h>

#include "model/scorers/registry.h"

namespace nmt {
namespace {

class LocationScorerImpl : public ScorerImpl {
 public:
  explicit LocationScorerImpl(const AttentionOptions& options)
      : position_layer_(register_module(
            "position_layer",
            torch::nn::Linear(torch::nn::LinearOptions(options.query_size, options.positions).bias(false)))),
        positions_(options.positions) {}

  torch::Tensor project_keys(const torch::Tensor& states) override { return states; }

  torch::Tensor query_weight() const override { return position_layer_->weight; }

  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep& step) override {
    const int64_t source_length = keys.size(1);
    const torch::Tensor& scores = step.projected;  // [B, P] W s
    if (source_length <= positions_) return scores.narrow(1, 0, source_length);
    const torch::Tensor rows =  // 0, 1, .., P - 1, P - 1, ..
        torch::arange(source_length, torch::TensorOptions().dtype(torch::kInt64).device(query.device()))
            .clamp_max(positions_ - 1);
    return scores.index_select(1, rows);  // [B, S]
  }

 private:
  torch::nn::Linear position_layer_;  // W: Q -> P
  int64_t positions_;
};

}  // namespace

ScorerEntry location_scorer_entry() {
  return {"location", "(W s)_j from the decoder state alone, Luong et al. 2015, eq. 8",
          [](const AttentionOptions& options) { return std::make_shared<LocationScorerImpl>(options); },
          [](const AttentionOptions& options) {
            return ScorerArithmetic{0.0, static_cast<double>(options.query_size * options.positions), 0.0};
          },
          /*content=*/false};
}

}  // namespace nmt
