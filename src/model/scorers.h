// The four attention scorers; see attention.h for the formulas and the file of each.
#pragma once

#include <torch/nn/modules/linear.h>

#include "model/attention.h"

namespace nmt {

class AdditiveScorerImpl : public ScorerImpl {
 public:
  explicit AdditiveScorerImpl(const AttentionOptions& options);
  torch::Tensor project_keys(const torch::Tensor& states) override;
  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) override;

  torch::nn::Linear query_layer;   // W: Q -> A
  torch::nn::Linear key_layer;     // U: C -> A
  torch::nn::Linear energy_layer;  // v: A -> 1
};

class DotScorerImpl : public ScorerImpl {
 public:
  explicit DotScorerImpl(const AttentionOptions& options);
  torch::Tensor project_keys(const torch::Tensor& states) override;
  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) override;

  torch::nn::Linear key_map{nullptr};  // C -> Q, only when C != Q
};

class GeneralScorerImpl : public ScorerImpl {
 public:
  explicit GeneralScorerImpl(const AttentionOptions& options);
  torch::Tensor project_keys(const torch::Tensor& states) override;
  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) override;

  torch::nn::Linear key_layer;  // W: C -> Q
};

class CosineScorerImpl : public ScorerImpl {
 public:
  explicit CosineScorerImpl(const AttentionOptions& options);
  torch::Tensor project_keys(const torch::Tensor& states) override;
  torch::Tensor score(const torch::Tensor& query, const torch::Tensor& keys) override;

  torch::nn::Linear key_map{nullptr};  // C -> Q, only when C != Q
  torch::Tensor log_sharpness;         // learned log beta, or undefined when fixed
  double fixed_sharpness;
};

}  // namespace nmt
