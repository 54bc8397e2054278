// Training pairs with protected spans masked as placeholder tokens (text/special_tokens.h), so
// that the model learns to copy a token it is given: translate then hands it each protected span
// as a token and puts the span back where the token comes out (text/protect.h, --placeholder-
// tokens), instead of leaving the place to the attention.
//
// A share of the pairs (placeholder-share) is masked: the spans both sides hold with the same text
// (URLs, e-mail addresses, numbers, printf, braces, variables, and words with a capital letter or a
// digit other than the first word: "Spiderman", "2012", "New York"'s "York") become one token
// each, the same on both sides; a pair without one gets a token at the start of both sides, or
// before the final punctuation of both. The numbers start at a random one, so that the model copies
// each of them, not only the first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace nmt {

class Framer;

class PairMasker {
 public:
  // `share`: the share of pairs masked (0 .. 1); `seed`: which pairs, and the choices made.
  PairMasker(double share, int seed);
  ~PairMasker();
  PairMasker(PairMasker&&) noexcept;
  PairMasker& operator=(PairMasker&&) noexcept;

  // Masks pair `index` (its place in the corpus) when the draw picks it; returns whether it did.
  bool mask(std::string& source, std::string& target, uint64_t index) const;

 private:
  double share_;
  uint64_t seed_;
  std::unique_ptr<const Framer> spans_;  // the built-in kinds, for the spans of both sides
};

}  // namespace nmt
