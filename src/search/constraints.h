// Terminology constraints: phrases every output must contain, met inside beam search with the
// dynamic beam allocation of Post & Vilar (2018), "Fast Lexically Constrained Decoding with Dynamic
// Beam Allocation for Neural Machine Translation".
//
// Each hypothesis carries a ConstraintState: which phrases it has produced whole, and the phrase it
// is in the middle of. Its bank is the number of constraint tokens it has met. At each step a
// constrained sentence's candidates are the beam's best extensions, each alive hypothesis's best
// next token, and every token that advances a hypothesis's constraints (the next token of the phrase
// under way, or the first token of any phrase not yet met); the K beams are shared out among the
// banks (allocate_banks), so that hypotheses which met more constraints survive beside better-scored
// ones that met fewer. A hypothesis may end (EOS) only once it has met them all.
#pragma once

#include <cstdint>
#include <vector>

namespace nmt {

using Phrase = std::vector<int64_t>;                        // target token ids
using SentenceConstraints = std::vector<Phrase>;            // phrases one output must contain
using BatchConstraints = std::vector<SentenceConstraints>;  // one entry per sentence (empty: none)

// The most phrases one sentence may have.
constexpr size_t kMaxConstraintPhrases = 64;

// Whether any sentence of the batch has a phrase.
bool has_constraints(const BatchConstraints& constraints);
// The tokens a sentence's phrases take together.
int64_t constraint_tokens(const SentenceConstraints& phrases);

// How far one hypothesis has come through its sentence's phrases. Copyable and small; the phrases
// must outlive it. A default state has no phrases: complete, bank 0.
class ConstraintState {
 public:
  ConstraintState() = default;
  explicit ConstraintState(const SentenceConstraints* phrases);

  int64_t met() const { return met_; }  // constraint tokens produced so far: the bank
  bool complete() const { return met_ == total_; }
  // Appends the tokens that would advance this state to `tokens`.
  void advancing_tokens(std::vector<int64_t>& tokens) const;
  // The state after `token` is produced. A phrase under way whose next token is not `token` is
  // dropped (its tokens no longer count); the tokens since it began, `token` included, may end in
  // the start of an unmet phrase (the same one shifted, or another), which goes on from there.
  // Where several unmet phrases start alike, the first listed is followed.
  ConstraintState advance(int64_t token) const;

 private:
  // Takes tokens[from..] as the start of the first unmet phrase they begin; whether one did.
  bool start(const Phrase& tokens, size_t from);

  const SentenceConstraints* phrases_ = nullptr;
  uint64_t done_ = 0;     // bit i: phrase i produced whole
  int32_t current_ = -1;  // the phrase under way, or -1
  int32_t progress_ = 0;  // its tokens produced so far
  int64_t met_ = 0;
  int64_t total_ = 0;
};

// Dynamic beam allocation: which of a sentence's candidates, in `banks[b]` by bank b (each list
// best first), fill the `beam` places. Each bank gets beam / banks.size() places, the remainder
// going to the highest banks; places a bank cannot fill go to the others, highest bank first.
// Returns (bank, index within the bank) pairs.
std::vector<std::pair<size_t, size_t>> allocate_banks(const std::vector<size_t>& bank_sizes, int64_t beam);

}  // namespace nmt
