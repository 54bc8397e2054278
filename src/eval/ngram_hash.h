// The bit mixer behind the hashes of BLEU's word n-grams and chrF's character n-grams.
#pragma once

#include <cstdint>

namespace nmt::eval::detail {

inline std::uint64_t mix_bits(std::uint64_t value) {
  // splitmix64 finaliser: cheap and spreads all input bits.
  value ^= value >> 30;
  value *= 0xBF58476D1CE4E5B9ULL;
  value ^= value >> 27;
  value *= 0x94D049BB133111EBULL;
  value ^= value >> 31;
  return value;
}

}  // namespace nmt::eval::detail
