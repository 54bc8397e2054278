#include "search/constraints.h"

#include <algorithm>

namespace nmt {

bool has_constraints(const BatchConstraints& constraints) {
  return std::any_of(constraints.begin(), constraints.end(),
                     [](const SentenceConstraints& phrases) { return !phrases.empty(); });
}

int64_t constraint_tokens(const SentenceConstraints& phrases) {
  int64_t tokens = 0;
  for (const Phrase& phrase : phrases) tokens += static_cast<int64_t>(phrase.size());
  return tokens;
}

ConstraintState::ConstraintState(const SentenceConstraints* phrases)
    : phrases_(phrases), total_(constraint_tokens(*phrases)) {}

void ConstraintState::advancing_tokens(std::vector<int64_t>& tokens) const {
  if (complete()) return;
  if (current_ >= 0) {
    tokens.push_back((*phrases_)[static_cast<size_t>(current_)][static_cast<size_t>(progress_)]);
    return;
  }
  for (size_t i = 0; i < phrases_->size(); ++i) {
    if (!(done_ >> i & 1)) tokens.push_back((*phrases_)[i].front());
  }
}

ConstraintState ConstraintState::advance(int64_t token) const {
  ConstraintState next = *this;
  if (complete()) return next;
  if (current_ >= 0) {
    const Phrase& phrase = (*phrases_)[static_cast<size_t>(current_)];
    if (phrase[static_cast<size_t>(progress_)] == token) {
      ++next.progress_;
      ++next.met_;
      if (next.progress_ == static_cast<int32_t>(phrase.size())) {
        next.done_ |= uint64_t{1} << current_;
        next.current_ = -1;
        next.progress_ = 0;
      }
      return next;
    }
    next.met_ -= progress_;  // the phrase broke off
    next.current_ = -1;
    next.progress_ = 0;
    Phrase recent(phrase.begin(), phrase.begin() + progress_);
    recent.push_back(token);
    for (size_t from = 1; from < recent.size(); ++from) {  // the longest start first
      if (next.start(recent, from)) return next;
    }
    return next;
  }
  next.start(Phrase{token}, 0);
  return next;
}

bool ConstraintState::start(const Phrase& tokens, size_t from) {
  const size_t length = tokens.size() - from;
  for (size_t i = 0; i < phrases_->size(); ++i) {
    const Phrase& phrase = (*phrases_)[i];
    if ((done_ >> i & 1) || phrase.size() < length ||
        !std::equal(tokens.begin() + static_cast<std::ptrdiff_t>(from), tokens.end(), phrase.begin())) {
      continue;
    }
    met_ += static_cast<int64_t>(length);
    if (phrase.size() == length) {
      done_ |= uint64_t{1} << i;
    } else {
      current_ = static_cast<int32_t>(i);
      progress_ = static_cast<int32_t>(length);
    }
    return true;
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> allocate_banks(const std::vector<size_t>& bank_sizes, int64_t beam) {
  const size_t banks = bank_sizes.size();
  const auto places = static_cast<size_t>(beam);
  std::vector<size_t> taken(banks, 0);
  size_t filled = 0;
  for (size_t b = 0; b < banks; ++b) {
    // The remainder of places / banks goes to the highest banks.
    const size_t share = places / banks + (b >= banks - places % banks ? 1 : 0);
    taken[b] = std::min(share, bank_sizes[b]);
    filled += taken[b];
  }
  for (size_t b = banks; b-- > 0 && filled < places;) {
    const size_t more = std::min(places - filled, bank_sizes[b] - taken[b]);
    taken[b] += more;
    filled += more;
  }
  std::vector<std::pair<size_t, size_t>> chosen;
  for (size_t b = 0; b < banks; ++b) {
    for (size_t i = 0; i < taken[b]; ++i) chosen.emplace_back(b, i);
  }
  return chosen;
}

}  // namespace nmt
