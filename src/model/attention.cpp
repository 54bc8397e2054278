#include "model/attention.h"

#include <torch/nn/functional/linear.h>

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "model/ops/attention_products.h"
#include "util/runtime.h"

namespace nmt {

torch::Tensor make_source_mask(const torch::Tensor& lengths, int64_t max_length, const torch::Device& device) {
  auto positions = torch::arange(max_length, torch::TensorOptions().dtype(torch::kInt64).device(device));
  return positions.unsqueeze(0) < to_device(lengths, device).unsqueeze(1);  // [B, S]
}

EncodedSource EncodedSource::index_select(const torch::Tensor& index, int64_t positions) const {
  const auto rows = [&](const torch::Tensor& tensor) {
    return (positions < 0 ? tensor : tensor.narrow(1, 0, positions)).index_select(0, index);
  };
  EncodedSource selected;
  selected.states = rows(states);
  if (keys.defined()) selected.keys = rows(keys);
  selected.mask = rows(mask);
  selected.summary = summary.index_select(0, index);
  return selected;
}

torch::Tensor pad_positions(const torch::Tensor& tensor, int64_t length, double value) {
  const int64_t missing = length - tensor.size(1);
  if (missing == 0) return tensor;
  std::vector<int64_t> pad(static_cast<size_t>(2 * (tensor.dim() - 1)), 0);  // last dimension first
  pad.back() = missing;
  return torch::constant_pad_nd(tensor, pad, value);
}

EncodedSource EncodedSource::cat_rows(const EncodedSource& first, const EncodedSource& second) {
  const int64_t length = std::max(first.mask.size(1), second.mask.size(1));
  const auto cat = [length](const torch::Tensor& a, const torch::Tensor& b, double value) {
    return torch::cat({pad_positions(a, length, value), pad_positions(b, length, value)});
  };
  EncodedSource joined;
  joined.states = cat(first.states, second.states, 0);
  if (first.keys.defined()) joined.keys = cat(first.keys, second.keys, 0);
  joined.mask = cat(first.mask, second.mask, 0);  // false
  joined.summary = torch::cat({first.summary, second.summary});
  return joined;
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

torch::Tensor project_query(const ScorerImpl& scorer, const torch::Tensor& query) {
  const torch::Tensor weight = scorer.query_weight();
  return weight.defined() ? torch::nn::functional::linear(query, weight) : torch::Tensor();
}

torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& mask) {
  // -inf before the softmax makes padded weights exactly 0 (exp(-inf) = 0); every row has at
  // least one real position (the source EOS), so no row is all -inf.
  const torch::Tensor padding = scores.dim() == 3 ? mask.logical_not().unsqueeze(1) : mask.logical_not();
  return torch::softmax(scores.masked_fill(padding, -std::numeric_limits<float>::infinity()), /*dim=*/-1);
}

AttentionResult AttentionImpl::forward(const torch::Tensor& query, const EncodedSource& source,
                                       const AttentionStep& step) {
  if (!scorer_) return {source.summary, torch::Tensor(), torch::Tensor()};  // plain encoder-decoder: fixed context
  TORCH_CHECK(query.dim() == 2 && source.keys.dim() == 3 && query.size(0) == source.keys.size(0),
              "attention: query [B, Q] and keys [B, S, K] expected");
  TORCH_CHECK(!scorer_->uses_coverage() || step.coverage.sizes() == source.mask.sizes(),
              "attention: this scorer needs the coverage [B, S]");
  AttentionStep projected_step = step;
  if (!step.projected.defined()) projected_step.projected = project_query(*scorer_, query);
  projected_step.mask = source.mask;
  torch::Tensor weights = scorer_->attend(query, source, projected_step);  // [B, S] or [B, N, S]
  const int64_t heads = scorer_->heads();
  if (heads == 1) return {weighted_sum(weights, source.states), weights, torch::Tensor()};  // sum_j w_j h_j
  // Head n mixes columns [n C/N, (n + 1) C/N) of the states: [B, N, S] x [B, S, N, C/N] -> [B, N, C/N].
  const int64_t batch = weights.size(0), positions = weights.size(2);
  const torch::Tensor sliced = source.states.view({batch, positions, heads, -1}).transpose(1, 2);  // [B, N, S, C/N]
  const torch::Tensor context = (weights.unsqueeze(3) * sliced).sum(2).reshape({batch, -1});       // [B, C]
  return {context, weights.mean(1), weights};
}

}  // namespace nmt

#include "model/scorers/registry.h"

namespace nmt {

std::shared_ptr<ScorerImpl> make_scorer(const AttentionOptions& options) {
  if (options.scorer == kNoAttention) return nullptr;
  return find_scorer(options.scorer).make(options);
}

}  // namespace nmt
