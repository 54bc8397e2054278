#include "search/ensemble.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/dispatch.h"
#include "kernels/row_kernels.h"

namespace nmt {

Ensemble::Ensemble(Seq2Seq model) : members_{std::move(model)} {}

Ensemble::Ensemble(std::vector<Seq2Seq> members) : members_(std::move(members)) {
  if (members_.empty()) throw std::invalid_argument("an ensemble needs at least one model");
  const int64_t vocabulary = members_.front()->decoder->options().vocab_size;
  for (const Seq2Seq& member : members_) {
    if (member->decoder->options().vocab_size != vocabulary) {
      throw std::invalid_argument("ensemble: the models' target vocabularies differ in size");
    }
    if (member->options().reverse_target != members_.front()->options().reverse_target) {
      throw std::invalid_argument(
          "ensemble: a right-to-left model (reverse-target) and a left-to-right one cannot decode together; "
          "rerank with both instead (nmt score)");
    }
  }
}

Ensemble::Source Ensemble::Source::index_select(const torch::Tensor& index, int64_t positions) const {
  Source selected;
  for (const EncodedSource& member : members) selected.members.push_back(member.index_select(index, positions));
  return selected;
}

Ensemble::Source Ensemble::Source::cat_rows(const Source& first, const Source& second) {
  Source joined;
  for (size_t m = 0; m < first.members.size(); ++m) {
    joined.members.push_back(EncodedSource::cat_rows(first.members[m], second.members[m]));
  }
  return joined;
}

Ensemble::State Ensemble::State::cat_rows(const State& first, const State& second) {
  State joined;
  for (size_t m = 0; m < first.members.size(); ++m) {
    joined.members.push_back(DecoderState::cat_rows(first.members[m], second.members[m]));
  }
  return joined;
}

Ensemble::State Ensemble::State::index_select(const torch::Tensor& index, int64_t positions) const {
  State selected;
  for (const DecoderState& member : members) selected.members.push_back(member.index_select(index, positions));
  return selected;
}

void Ensemble::State::copy_(const State& from) {
  for (size_t m = 0; m < members.size(); ++m) {
    DecoderState& to = members[m];
    to.hidden.copy_(from.members[m].hidden);
    to.attentional.copy_(from.members[m].attentional);
    if (to.coverage.defined()) to.coverage.copy_(from.members[m].coverage);
  }
}

Ensemble::Source Ensemble::encode(const torch::Tensor& source, const torch::Tensor& lengths) {
  Source encoded;
  for (Seq2Seq& member : members_) encoded.members.push_back(member->encode(source, lengths));
  return encoded;
}

Ensemble::State Ensemble::initial_state(const Source& source) {
  State state;
  for (size_t m = 0; m < members_.size(); ++m) {
    state.members.push_back(members_[m]->decoder->initial_state(source.members[m]));
  }
  return state;
}

torch::Tensor log_softmax_rows(const torch::Tensor& logits) {
  const torch::Tensor z = logits.to(torch::kFloat32).contiguous();
  if (!kernels::use_kernel(kernels::Operation::kLogSoftmax, {z}, z.dim() == 2)) return torch::log_softmax(z, 1);
  torch::Tensor out = torch::empty_like(z);
  const int64_t cols = z.size(1);
  at::parallel_for(0, z.size(0), std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, cols)),
                   [&](int64_t begin, int64_t end) {
                     kernels::log_softmax_rows(z.data_ptr<float>() + begin * cols, end - begin, cols,
                                               out.data_ptr<float>() + begin * cols);
                   });
  return out;
}

Ensemble::Step Ensemble::step(const torch::Tensor& previous_tokens, const State& state, const Source& source,
                              bool normalize) {
  Step result;
  torch::Tensor attention_sum;
  int64_t attending = 0;
  // With a restricted output layer, tokens are places in output_ids_: the embeddings take target ids.
  const torch::Tensor tokens = output_ids_.defined() ? output_ids_.index_select(0, previous_tokens) : previous_tokens;
  for (size_t m = 0; m < members_.size(); ++m) {
    StepOutput out = members_[m]->decoder->step(tokens, state.members[m], source.members[m],
                                                output_rows_.empty() ? OutputRows{} : output_rows_[m]);
    if (!normalize && members_.size() == 1) {
      result.logits = out.logits.to(torch::kFloat32);
    } else {
      torch::Tensor log_probs = log_softmax_rows(out.logits);  // [B, V]
      result.log_probs = m == 0 ? log_probs : result.log_probs + log_probs;
    }
    if (out.attention.defined()) {
      attention_sum = attending == 0 ? out.attention : attention_sum + out.attention;
      ++attending;
    }
    result.state.members.push_back(std::move(out.state));
  }
  const auto count = static_cast<double>(members_.size());
  if (members_.size() > 1) result.log_probs = result.log_probs / count;
  if (attending > 0) result.attention = attending == 1 ? attention_sum : attention_sum / static_cast<double>(attending);
  return result;
}

Ensemble Ensemble::restricted_to(const torch::Tensor& ids) const {
  TORCH_CHECK(ids.dim() == 1 && ids.size(0) > 0 && ids.scalar_type() == torch::kInt64,
              "Ensemble::restricted_to: ids [K] int64 expected");
  Ensemble restricted = *this;
  restricted.output_ids_ = ids;
  restricted.output_rows_.clear();
  for (const Seq2Seq& member : members_) restricted.output_rows_.push_back(member->decoder->output_rows(ids));
  return restricted;
}

bool Ensemble::uses_step_position() const {
  for (const Seq2Seq& member : members_) {
    if (member->decoder->attention->uses_position()) return true;
  }
  return false;
}

bool Ensemble::has_attention() const {
  for (const Seq2Seq& member : members_) {
    if (member->decoder->attention->has_scorer()) return true;
  }
  return false;
}

void Ensemble::train(bool on) {
  for (Seq2Seq& member : members_) member->train(on);
}

}  // namespace nmt
