#include "search/continuous.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "text/batching.h"
#include "text/special_tokens.h"
#include "util/device_rules.h"

namespace nmt {

namespace {

constexpr int64_t kFewestSlots = 16;

// A member's tensors whose first dimension is the row: states, keys (undefined for a scorer without
// them), mask, and last the summary, the one without source positions.
constexpr size_t kSummary = 3;
std::array<torch::Tensor*, 4> row_tensors(EncodedSource& source) {
  return {&source.states, &source.keys, &source.mask, &source.summary};
}
std::array<const torch::Tensor*, 4> row_tensors(const EncodedSource& source) {
  return {&source.states, &source.keys, &source.mask, &source.summary};
}

// `source`'s rows in slots of `capacity` rows and `positions` source positions (at most its own
// rows, its positions cut or padded as encode() pads: states and keys 0, mask false).
Ensemble::Source with_room(const Ensemble::Source& source, int64_t capacity, int64_t positions) {
  Ensemble::Source room = source;
  for (EncodedSource& member : room.members) {
    for (size_t k = 0; k < 4; ++k) {
      torch::Tensor& tensor = *row_tensors(member)[k];
      if (!tensor.defined()) continue;
      std::vector<int64_t> sizes = tensor.sizes().vec();
      sizes[0] = capacity;
      torch::Tensor grown, rows = tensor;
      if (k != kSummary) {
        sizes[1] = positions;
        rows = rows.narrow(1, 0, std::min(positions, rows.size(1)));
      }
      grown = torch::zeros(sizes, tensor.options());
      torch::Tensor target = grown.narrow(0, 0, rows.size(0));
      (k == kSummary ? target : target.narrow(1, 0, rows.size(1))).copy_(rows);
      tensor = grown;
    }
  }
  return room;
}

// The first `rows` slots, as views.
Ensemble::Source first_rows(const Ensemble::Source& slots, int64_t rows) {
  Ensemble::Source in_use = slots;
  for (EncodedSource& member : in_use.members) {
    for (torch::Tensor* tensor : row_tensors(member)) {
      if (tensor->defined()) *tensor = tensor->narrow(0, 0, rows);
    }
  }
  return in_use;
}

// `rows` into the slots from `first` on: their positions, and padding after them.
void write_rows(const Ensemble::Source& slots, int64_t first, const Ensemble::Source& rows) {
  for (size_t m = 0; m < slots.members.size(); ++m) {
    for (size_t k = 0; k < 4; ++k) {
      const torch::Tensor& slot = *row_tensors(slots.members[m])[k];
      const torch::Tensor& tensor = *row_tensors(rows.members[m])[k];
      if (!slot.defined()) continue;
      torch::Tensor target = slot.narrow(0, first, tensor.size(0));
      if (k == kSummary) {
        target.copy_(tensor);
        continue;
      }
      const int64_t length = tensor.size(1);
      target.narrow(1, 0, length).copy_(tensor);
      target.narrow(1, length, target.size(1) - length).zero_();
    }
  }
}

// Slot `to` takes slot `from`'s row.
void move_row(const Ensemble::Source& slots, int64_t from, int64_t to) {
  for (const EncodedSource& member : slots.members) {
    for (const torch::Tensor* slot : row_tensors(member)) {
      if (slot->defined()) slot->select(0, to).copy_(slot->select(0, from));
    }
  }
}

}  // namespace

bool ContinuousGreedy::supports(const Ensemble& model, const SearchOptions& options, const torch::Device& device) {
  return !queues_work(device) && options.beam_size == 1 && options.n_best == 1 && !options.samples() &&
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
  // The new rows' tensors first, so that an exception leaves the batch as it was.
  auto [source, lengths] = pad_sequences(pointers);
  Ensemble::Source encoded = model_.encode(source, lengths);
  Ensemble::State state = model_.initial_state(encoded);
  torch::Tensor previous = torch::full({static_cast<int64_t>(sources.size())}, kBosId, torch::kInt64);
  const auto rows = static_cast<int64_t>(rows_.size()), joining = static_cast<int64_t>(sources.size());
  const int64_t length = encoded.mask().size(1);
  const bool room = rows > 0 && rows + joining <= slots_.mask().size(0) && length <= slots_.mask().size(1);
  Ensemble::Source slots;
  if (!room) {  // the rows in use and the new ones in slots of their own, with room to grow
    Ensemble::Source joined = rows == 0 ? encoded : Ensemble::Source::cat_rows(encoded_, encoded);
    slots = with_room(joined, std::max<int64_t>(kFewestSlots, 2 * (rows + joining)), joined.mask().size(1));
  }
  if (rows > 0) {
    state = Ensemble::State::cat_rows(state_, state);  // coverage padded to the slots' positions
    previous = torch::cat({previous_, previous});      // BOS keeps its place in any list
  }
  if (room) {
    write_rows(slots_, rows, encoded);  // into free slots: the rows in use stay where they are
  } else {
    slots_ = std::move(slots);
  }
  encoded_ = first_rows(slots_, rows + joining);
  state_ = std::move(state);
  previous_ = std::move(previous);
  for (size_t i = 0; i < sources.size(); ++i) {
    Row& row = rows_.emplace_back();
    row.tag = tags[i];
    row.source = sources[i];
    row.limit = max_output_length(static_cast<int64_t>(sources[i].size()), options_);
  }
  if (shortlist_) choose_vocabulary();
}

void ContinuousGreedy::drop_ended_rows() {
  // Each ended row's slot takes the last running row: only the rows that move are copied.
  std::vector<int64_t> order(rows_.size());  // the row each slot then holds
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::pair<int64_t, int64_t>> moves;  // (from, to)
  size_t free = 0, end = rows_.size();             // slots [0, free) hold running rows, [end, ...) none
  while (true) {
    while (free < end && !rows_[free].ended) ++free;
    while (end > free && rows_[end - 1].ended) --end;
    if (free >= end) break;
    --end;
    moves.emplace_back(end, free);
    order[free++] = static_cast<int64_t>(end);
  }
  const auto kept = static_cast<int64_t>(end);
  size_t longest = 0;
  for (size_t slot = 0; slot < end; ++slot) {
    longest = std::max(longest, rows_[static_cast<size_t>(order[slot])].source.size());
  }
  if (kept > 0) {  // the new tensors first: an exception leaves the batch as it was
    const torch::Tensor index = torch::tensor(order, torch::kInt64).narrow(0, 0, kept);
    // Once a quarter of the positions are padding for every row, the source positions only the
    // rows that left had go too (a copy of the rows that stay).
    const auto positions = static_cast<int64_t>(longest);
    const bool trim = 4 * positions <= 3 * slots_.mask().size(1);
    Ensemble::State state = state_.index_select(index, trim ? positions : -1);
    torch::Tensor previous = previous_.index_select(0, index);
    if (trim) {
      slots_ = with_room(slots_.index_select(index, positions), slots_.mask().size(0), positions);
    } else {
      for (const auto& [from, to] : moves) move_row(slots_, from, to);
    }
    state_ = std::move(state);
    previous_ = std::move(previous);
  }
  encoded_ = first_rows(slots_, kept);
  std::vector<Row> running;
  for (size_t slot = 0; slot < end; ++slot) running.push_back(std::move(rows_[static_cast<size_t>(order[slot])]));
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
  if (rows_.empty()) return {};
  const torch::Tensor ids = ids_.defined() ? ids_.index_select(0, previous_) : previous_;
  const auto* id = ids.data_ptr<int64_t>();
  return std::vector<int64_t>(id, id + ids.numel());
}

std::vector<ContinuousGreedy::Ended> ContinuousGreedy::step() {
  std::vector<Ended> ended;
  if (rows_.empty()) return ended;
  Ensemble::Step out = decoding_.step(previous_, state_, encoded_);
  auto [log_probs, tokens] = ban_tokens(out.log_probs, options_).max(/*dim=*/1);  // [R]
  const torch::Tensor log_probs_cpu = log_probs.to(torch::kFloat64).contiguous();
  const auto* log_prob = log_probs_cpu.data_ptr<double>();
  const auto* token = tokens.data_ptr<int64_t>();
  const int64_t* id_of = ids_.defined() ? ids_.data_ptr<int64_t>() : nullptr;
  for (size_t r = 0; r < rows_.size(); ++r) {
    Row& row = rows_[r];
    row.hypothesis.log_probability += log_prob[r];
    ++row.steps;
    const bool eos = token[r] == kEosId;
    if (!eos) row.hypothesis.tokens.push_back(id_of ? id_of[token[r]] : token[r]);
    if (eos || row.steps >= row.limit) {
      row.hypothesis.score = row.hypothesis.log_probability / length_penalty(row.steps, options_.length_penalty);
      ended.push_back({row.tag, std::move(row.hypothesis)});
      row.ended = true;
    }
  }
  state_ = std::move(out.state);
  previous_ = tokens;
  if (!ended.empty()) drop_ended_rows();
  return ended;
}

}  // namespace nmt
