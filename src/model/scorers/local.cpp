// Local attention, Luong et al. 2015, section 3.2: at step t the decoder attends only to a window
// [p_t - D, p_t + D] of source positions around an aligned position p_t, with weights
//   a_t(j) = align(s_t, h_j) * exp(-(j - p_t)^2 / (2 sigma^2)),   sigma = D / 2   (eq. 10)
// where align is the softmax of a content scorer's scores (local-scorer: additive, dot, scaled-dot,
// general or cosine; Luong's best used general) over the window's real positions. The Gaussian
// favours positions near p_t, so a row's weights sum to less than 1.
//   local-m (monotonic): p_t = t, the target position (kept within the source: at most S - 1).
//   local-p (predictive): p_t = (S - 1) sigmoid(v_p^T tanh(W_p s_t))                   (eq. 9)
// S is the row's real source length. Positions are 0-based here (Luong's 1-based p_t = S sigmoid(.)
// spans (0, S); this spans [0, S - 1], the real positions). The gradient reaches p_t through the
// Gaussian (the window's edges are flat), as in the paper.
#include <torch/torch.h>

#include "model/scorers/registry.h"

namespace nmt {
namespace {

class LocalScorerImpl : public ScorerImpl {
 public:
  LocalScorerImpl(const AttentionOptions& options, bool predictive)
      : window_(options.local_window), predictive_(predictive) {
    AttentionOptions content_options = options;
    content_options.scorer = options.local_scorer;
    content_options.coverage = false;
    content_ = register_module("content", find_scorer(options.local_scorer).make(content_options));
    TORCH_CHECK(content_->heads() == 1 && !content_->uses_coverage(),
                "local attention: local-scorer must be a content scorer (", options.local_scorer, ")");
    if (predictive_) {
      position_query_ = register_module(
          "position_query",
          torch::nn::Linear(torch::nn::LinearOptions(options.query_size, options.attention_size).bias(false)));
      position_energy_ = register_module(
          "position_energy", torch::nn::Linear(torch::nn::LinearOptions(options.attention_size, 1).bias(false)));
    }
  }

  torch::Tensor project_keys(const torch::Tensor& states) override { return content_->project_keys(states); }
  KeyMap key_map() const override { return content_->key_map(); }
  bool uses_position() const override { return !predictive_; }  // local-m: p_t = t

  torch::Tensor query_weight() const override {  // W_p, local-p's
    return position_query_ ? position_query_->weight : torch::Tensor();
  }

  // The content scorer's scores over every position (attend() restricts them to the window).
  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep& step) override {
    AttentionStep content_step = step;  // the content scorer's own W s, not W_p s
    content_step.projected = project_query(*content_, query);
    return content_->score(query, keys, content_step);
  }

  torch::Tensor attend(const torch::Tensor& query, const EncodedSource& source, const AttentionStep& step) override {
    const int64_t positions = source.mask.size(1);
    const torch::Tensor last = source.mask.sum(1, /*keepdim=*/true).to(query.scalar_type()) - 1;  // [B, 1] S - 1
    torch::Tensor aligned;                                                                        // [B, 1] p_t
    if (predictive_) {
      aligned = last * torch::sigmoid(position_energy_(torch::tanh(step.projected)));  // W_p s projected
    } else {
      aligned = last.clamp_max(static_cast<double>(step.position));
    }
    const torch::Tensor distance =  // [B, S] j - p_t
        torch::arange(positions, query.options()).unsqueeze(0) - aligned;
    const torch::Tensor window = source.mask.logical_and(distance.abs() <= static_cast<double>(window_));
    const torch::Tensor align = masked_softmax(score(query, source.keys, step), window);  // [B, S]
    const double sigma = static_cast<double>(window_) / 2;
    return align * torch::exp(-distance.square() / (2 * sigma * sigma));
  }

 private:
  std::shared_ptr<ScorerImpl> content_;
  torch::nn::Linear position_query_{nullptr};   // W_p: Q -> A, local-p only
  torch::nn::Linear position_energy_{nullptr};  // v_p: A -> 1, local-p only
  int64_t window_;                              // D
  bool predictive_;
};

// The content scorer's arithmetic, plus local-p's position predictor per step.
ScorerArithmetic local_arithmetic(const AttentionOptions& options, bool predictive) {
  ScorerArithmetic arithmetic = find_scorer(options.local_scorer).arithmetic(options);
  if (predictive) {
    arithmetic.per_query += static_cast<double>((options.query_size + 1) * options.attention_size);
  }
  return arithmetic;
}

}  // namespace

ScorerEntry local_p_scorer_entry() {
  return {"local-p", "local-scorer in a window around p_t = S sigmoid(v_p^T tanh(W_p s)), Luong et al. 2015, 3.2",
          [](const AttentionOptions& options) { return std::make_shared<LocalScorerImpl>(options, true); },
          [](const AttentionOptions& options) { return local_arithmetic(options, true); },
          /*content=*/false};
}

ScorerEntry local_m_scorer_entry() {
  return {"local-m", "local-scorer in a window around p_t = t, Luong et al. 2015, section 3.2",
          [](const AttentionOptions& options) { return std::make_shared<LocalScorerImpl>(options, false); },
          [](const AttentionOptions& options) { return local_arithmetic(options, false); },
          /*content=*/false};
}

}  // namespace nmt
