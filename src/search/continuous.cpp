#include "search/continuous.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "text/batching.h"
#include "text/special_tokens.h"

namespace nmt {

bool ContinuousGreedy::supports(const Ensemble& model, const SearchOptions& options, const torch::Device& device) {
  return device.is_cpu() && options.beam_size == 1 && options.n_best == 1 && !options.samples() &&
         !options.return_attention && !model.uses_step_position();
}

ContinuousGreedy::ContinuousGreedy(Ensemble model, SearchOptions options, std::shared_ptr<const Shortlist> shortlist)
    : model_(std::move(model)), decoding_(model_), options_(options), shortlist_(std::move(shortlist)) {
  if (!supports(model_, options_, torch::kCPU)) {
    throw std::invalid_argument("continuous batching takes greedy search without attention weights");
  }
}

void ContinuousGreedy::add(const std::vector<std::vector<int64_t>>& sources, const std::vector<int64_t>& tags) {
  if (sources.empty()) return;
  if (tags.size() != sources.size()) throw std::invalid_argument("ContinuousGreedy::add: one tag per source");
  std::vector<const std::vector<int64_t>*> pointers;
  for (const std::vector<int64_t>& source : sources) {
    if (source.empty() || source.back() != kEosId) {
      throw std::invalid_argument("ContinuousGreedy::add: each source must end with EOS");
    }
    pointers.push_back(&source);
  }
  if (running_ < rows_.size()) drop_ended_rows();
  // The new rows' tensors first, so that an exception leaves the batch as it was.
  auto [source, lengths] = pad_sequences(pointers);
  Ensemble::Source encoded = model_.encode(source, lengths);
  Ensemble::State state = model_.initial_state(encoded);
  torch::Tensor previous = torch::full({static_cast<int64_t>(sources.size())}, kBosId, torch::kInt64);
  if (!rows_.empty()) {
    encoded = Ensemble::Source::cat_rows(encoded_, encoded);
    state = Ensemble::State::cat_rows(state_, state);
    previous = torch::cat({previous_, previous});  // BOS keeps its place in any list
  }
  encoded_ = std::move(encoded);
  state_ = std::move(state);
  previous_ = std::move(previous);
  for (size_t i = 0; i < sources.size(); ++i) {
    Row& row = rows_.emplace_back();
    row.tag = tags[i];
    row.source = sources[i];
    row.limit = max_output_length(static_cast<int64_t>(sources[i].size()), options_);
  }
  running_ += sources.size();
  if (shortlist_) choose_vocabulary();
}

void ContinuousGreedy::drop_ended_rows() {
  std::vector<int64_t> keep;
  size_t longest = 0;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].ended) continue;
    keep.push_back(static_cast<int64_t>(r));
    longest = std::max(longest, rows_[r].source.size());
  }
  if (!keep.empty()) {  // tensors first, rows after: an exception leaves the batch as it was
    // Only the source positions the rows that stay fill: their attention runs over no more padding.
    const torch::Tensor index = torch::tensor(keep, torch::kInt64);
    Ensemble::Source encoded = encoded_.index_select(index, static_cast<int64_t>(longest));
    Ensemble::State state = state_.index_select(index, static_cast<int64_t>(longest));
    torch::Tensor previous = previous_.index_select(0, index);
    encoded_ = std::move(encoded);
    state_ = std::move(state);
    previous_ = std::move(previous);
  }
  std::vector<Row> running;
  for (const int64_t r : keep) running.push_back(std::move(rows_[static_cast<size_t>(r)]));
  rows_ = std::move(running);
}

void ContinuousGreedy::choose_vocabulary() {
  const auto rows = static_cast<int64_t>(rows_.size());
  const torch::Tensor previous = ids_.defined() ? ids_.index_select(0, previous_) : previous_;  // target ids
  std::vector<const std::vector<int64_t>*> sources;
  for (const Row& row : rows_) sources.push_back(&row.source);
  const auto* given = previous.data_ptr<int64_t>();
  torch::Tensor ids = shortlist_->select(sources, std::vector<int64_t>(given, given + rows));
  if (ids.size(0) < kEosId + 1 + 2 * int64_t{options_.beam_size}) {  // as Translator: the whole vocabulary
    ids_ = torch::Tensor();
    decoding_ = model_;
    previous_ = previous;
    return;
  }
  // Each row's last token as a place in the new list (it holds them all: `given` above).
  const torch::Tensor places = torch::searchsorted(ids, previous);
  ids_ = ids;
  decoding_ = model_.restricted_to(ids_);
  previous_ = places;
}

std::vector<int64_t> ContinuousGreedy::last_tokens() const {
  std::vector<int64_t> tokens;
  if (running_ == 0) return tokens;
  const torch::Tensor ids = ids_.defined() ? ids_.index_select(0, previous_) : previous_;
  const auto* id = ids.data_ptr<int64_t>();
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (!rows_[r].ended) tokens.push_back(id[r]);
  }
  return tokens;
}

std::vector<ContinuousGreedy::Ended> ContinuousGreedy::step() {
  std::vector<Ended> ended;
  if (running_ == 0) return ended;
  Ensemble::Step out = decoding_.step(previous_, state_, encoded_);
  auto [log_probs, tokens] = ban_tokens(out.log_probs, options_).max(/*dim=*/1);  // [R]
  const torch::Tensor log_probs_cpu = log_probs.to(torch::kFloat64).contiguous();
  const auto* log_prob = log_probs_cpu.data_ptr<double>();
  const auto* token = tokens.data_ptr<int64_t>();
  const int64_t* id_of = ids_.defined() ? ids_.data_ptr<int64_t>() : nullptr;
  for (size_t r = 0; r < rows_.size(); ++r) {
    Row& row = rows_[r];
    if (row.ended) continue;
    row.hypothesis.log_probability += log_prob[r];
    ++row.steps;
    const bool eos = token[r] == kEosId;
    if (!eos) row.hypothesis.tokens.push_back(id_of ? id_of[token[r]] : token[r]);
    if (eos || row.steps >= row.limit) {
      row.hypothesis.score = row.hypothesis.log_probability / length_penalty(row.steps, options_.length_penalty);
      ended.push_back({row.tag, std::move(row.hypothesis)});
      row.ended = true;
      --running_;
    }
  }
  state_ = std::move(out.state);
  previous_ = tokens;
  // Ended rows leave once they are a quarter of the batch (each leaving copies the encoder output
  // of the rows that stay); until then they are decoded for nothing.
  if ((rows_.size() - running_) * 4 >= rows_.size()) drop_ended_rows();
  return ended;
}

}  // namespace nmt
