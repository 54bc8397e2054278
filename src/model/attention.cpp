#include "model/attention.h"

#include <torch/torch.h>

#include <limits>

#include "model/fused_attention.h"

namespace nmt {

torch::Tensor make_source_mask(const torch::Tensor& lengths, int64_t max_length, const torch::Device& device) {
  auto positions = torch::arange(max_length, torch::TensorOptions().dtype(torch::kInt64).device(device));
  return positions.unsqueeze(0) < lengths.to(device).unsqueeze(1);  // [B, S]
}

EncodedSource EncodedSource::index_select(const torch::Tensor& index) const {
  EncodedSource selected;
  selected.states = states.index_select(0, index);
  if (keys.defined()) selected.keys = keys.index_select(0, index);
  selected.mask = mask.index_select(0, index);
  selected.summary = summary.index_select(0, index);
  return selected;
}

torch::Tensor batched_matvec(const torch::Tensor& matrices, const torch::Tensor& vectors) {
  return (matrices * vectors.unsqueeze(1)).sum(2);  // [B, S, K] * [B, 1, K] -> [B, S]
}

AttentionImpl::AttentionImpl(const AttentionOptions& options) {
  scorer_ = make_scorer(options);
  if (scorer_) register_module("scorer", scorer_);
}

torch::Tensor AttentionImpl::project_keys(const torch::Tensor& states) {
  return scorer_ ? scorer_->project_keys(states) : torch::Tensor();
}

AttentionResult AttentionImpl::forward(const torch::Tensor& query, const EncodedSource& source) {
  if (!scorer_) return {source.summary, torch::Tensor()};  // plain encoder-decoder: fixed context
  TORCH_CHECK(query.dim() == 2 && source.keys.dim() == 3 && query.size(0) == source.keys.size(0),
              "attention: query [B, Q] and keys [B, S, K] expected");
  torch::Tensor scores = scorer_->score(query, source.keys);  // [B, S]
  // -inf before the softmax makes padded weights exactly 0 (exp(-inf) = 0); every row has at
  // least one real position (the source EOS), so no row is all -inf.
  scores = scores.masked_fill(source.mask.logical_not(), -std::numeric_limits<float>::infinity());
  torch::Tensor weights = torch::softmax(scores, /*dim=*/1);     // [B, S]
  torch::Tensor context = weighted_sum(weights, source.states);  // [B, C], sum_j weights_j h_j
  return {context, weights};
}

}  // namespace nmt

#include "model/scorers/registry.h"

namespace nmt {

std::shared_ptr<ScorerImpl> make_scorer(const AttentionOptions& options) {
  if (options.scorer == kNoAttention) return nullptr;
  return find_scorer(options.scorer).make(options);
}

}  // namespace nmt
