#include "search/continuous.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "text/batching.h"
#include "text/special_tokens.h"

namespace nmt {
namespace {

// The rows `index` of the batch's source and state, cut to the first `length` source positions
// (those of the longest source among the rows): the attention of the rows that stay then runs over
// no more padding than it must.
void keep_rows(Ensemble::Source& source, Ensemble::State& state, const torch::Tensor& index, int64_t length) {
  const auto cut = [&](const torch::Tensor& tensor) { return tensor.narrow(1, 0, length).index_select(0, index); };
  for (EncodedSource& member : source.members) {
    member.states = cut(member.states);
    if (member.keys.defined()) member.keys = cut(member.keys);
    member.mask = cut(member.mask);
    member.summary = member.summary.index_select(0, index);
  }
  for (DecoderState& member : state.members) {
    member.hidden = member.hidden.index_select(1, index);
    member.attentional = member.attentional.index_select(0, index);
    if (member.coverage.defined()) member.coverage = cut(member.coverage);
  }
}

}  // namespace

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
  if (running_ < rows_.size()) drop_ended_rows();
  std::vector<const std::vector<int64_t>*> pointers;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty() || sources[i].back() != kEosId) {
      throw std::invalid_argument("ContinuousGreedy::add: each source must end with EOS");
    }
    pointers.push_back(&sources[i]);
    rows_.push_back(
        {tags.at(i), sources[i], max_output_length(static_cast<int64_t>(sources[i].size()), options_), 0, false, {}});
  }
  running_ += sources.size();
  auto [source, lengths] = pad_sequences(pointers);
  const Ensemble::Source encoded = model_.encode(source, lengths);
  const Ensemble::State state = model_.initial_state(encoded);
  torch::Tensor start = torch::full({static_cast<int64_t>(sources.size())}, kBosId, torch::kInt64);
  if (rows_.size() == sources.size()) {  // nothing was running
    encoded_ = encoded;
    state_ = state;
    previous_ = start;
  } else {
    encoded_ = Ensemble::Source::cat_rows(encoded_, encoded);
    state_ = Ensemble::State::cat_rows(state_, state);
    previous_ = torch::cat({previous_, start});  // BOS keeps its place in any list
  }
  if (shortlist_) choose_vocabulary();
}

void ContinuousGreedy::drop_ended_rows() {
  std::vector<int64_t> keep;
  std::vector<Row> running;
  size_t longest = 0;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].ended) continue;
    keep.push_back(static_cast<int64_t>(r));
    longest = std::max(longest, rows_[r].source.size());
    running.push_back(std::move(rows_[r]));
  }
  rows_ = std::move(running);
  if (rows_.empty()) return;
  const torch::Tensor index = torch::tensor(keep, torch::kInt64);
  keep_rows(encoded_, state_, index, static_cast<int64_t>(longest));
  previous_ = previous_.index_select(0, index);
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
