// Dot attention, score(s, h_j) = scale * s^T h_j: `dot` (scale 1, dot.cpp) and `scaled-dot`
// (scale 1 / sqrt(Q), scaled_dot.cpp) are this module.
//
// Sizes: the query is the decoder state (Q = H_d) and the keys are encoder states (C = 2 H_e
// for the bidirectional encoder). When Q == C the keys are the encoder states themselves, with no
// parameters: the pure dot product. When they differ, a dot product is undefined, so the states
// are first mapped to size Q by one learned bias-free matrix, computed once per batch; that makes
// the scorer identical in form to `general`. Configure decoder-hidden-size = 2 * encoder-hidden-size
// to compare the pure dot scorer.
#pragma once

#include <torch/nn/modules/linear.h>

#include "model/attention.h"

namespace nmt {

class DotScorerImpl : public ScorerImpl {
 public:
  DotScorerImpl(const AttentionOptions& options, double scale);

  torch::Tensor project_keys(const torch::Tensor& states) override;
  KeyMap key_map() const override { return key_map_ ? KeyMap{key_map_->weight, key_map_->bias} : KeyMap{}; }
  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys, const AttentionStep& step) override;

 private:
  torch::nn::Linear key_map_{nullptr};  // C -> Q, only when C != Q
  double scale_;
};

}  // namespace nmt
