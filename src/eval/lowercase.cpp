// Python str.lower(), needed because sacreBLEU lowercases with it
// (sacrebleu/metrics/bleu.py, BLEU._preprocess_segment). The tables
// (lowercase_tables.inc) were generated from CPython 3.11 (Unicode 14.0) by
// probing str.lower() on every code point (scripts/gen_lowercase_tables.py),
// so they reproduce its full (not just ASCII) case mapping.
#include "eval/lowercase.h"

#include "text/utf8.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace nmt::eval {
namespace {

struct LowercaseRange {
  char32_t first;
  char32_t last;
  std::int32_t delta;  // lowercase = code point + delta
  char32_t stride;     // 1: every code point in range; 2: every other one
};

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "eval/lowercase_tables.inc"

template <std::size_t Size>
bool in_ranges(const CodePointRange (&ranges)[Size], char32_t code_point) {
  const auto* after = std::upper_bound(std::begin(ranges), std::end(ranges), code_point,
                                       [](char32_t value, const CodePointRange& range) { return value < range.first; });
  return after != std::begin(ranges) && code_point <= (after - 1)->last;
}

char32_t simple_lowercase(char32_t code_point) {
  const auto* after = std::upper_bound(std::begin(kLowercaseRanges), std::end(kLowercaseRanges), code_point,
                                       [](char32_t value, const LowercaseRange& range) { return value < range.first; });
  if (after == std::begin(kLowercaseRanges)) {
    return code_point;
  }
  const LowercaseRange& range = *(after - 1);
  if (code_point > range.last || (code_point - range.first) % range.stride != 0) {
    return code_point;
  }
  return static_cast<char32_t>(static_cast<std::int64_t>(code_point) + range.delta);
}

struct DecodedCharacter {
  char32_t code_point;
  std::size_t start;
  std::size_t length;
};

// CPython's handle_capital_sigma (Objects/unicodeobject.c): U+03A3 becomes
// final sigma U+03C2 when a cased letter precedes it and none follows it,
// skipping case-ignorable characters on both sides.
char32_t lowercase_capital_sigma(const std::vector<DecodedCharacter>& characters, std::size_t index) {
  std::size_t before = index;
  bool final_sigma = false;
  while (before > 0) {
    --before;
    const char32_t code_point = characters[before].code_point;
    if (!in_ranges(kCaseIgnorableRanges, code_point)) {
      final_sigma = in_ranges(kCasedRanges, code_point);
      break;
    }
  }
  if (final_sigma) {
    for (std::size_t after = index + 1; after < characters.size(); ++after) {
      const char32_t code_point = characters[after].code_point;
      if (!in_ranges(kCaseIgnorableRanges, code_point)) {
        final_sigma = !in_ranges(kCasedRanges, code_point);
        break;
      }
    }
  }
  return final_sigma ? 0x3C2 : 0x3C3;
}

}  // namespace

std::string python_lower(const std::string& text) {
  const bool is_ascii = std::all_of(text.begin(), text.end(),
                                    [](char character) { return static_cast<unsigned char>(character) < 0x80; });
  if (is_ascii) {
    std::string result = text;
    for (char& character : result) {
      if (character >= 'A' && character <= 'Z') {
        character = static_cast<char>(character - 'A' + 'a');
      }
    }
    return result;
  }

  std::vector<DecodedCharacter> characters;
  characters.reserve(text.size());
  for (std::size_t position = 0; position < text.size();) {
    const std::size_t start = position;
    const char32_t code_point = next_code_point(text, position);
    characters.push_back({code_point, start, position - start});
  }

  std::string result;
  result.reserve(text.size() + 8);
  for (std::size_t index = 0; index < characters.size(); ++index) {
    const DecodedCharacter& character = characters[index];
    char32_t lowered = character.code_point;
    if (character.code_point == 0x3A3) {
      lowered = lowercase_capital_sigma(characters, index);
    } else if (character.code_point == 0x130) {
      // LATIN CAPITAL LETTER I WITH DOT ABOVE lowercases to two code
      // points in Python (SpecialCasing.txt): i + COMBINING DOT ABOVE.
      result += 'i';
      append_utf8(result, 0x307);
      continue;
    } else {
      lowered = simple_lowercase(character.code_point);
    }
    if (lowered == character.code_point) {
      // Copy the original bytes so malformed UTF-8 passes through as is.
      result.append(text, character.start, character.length);
    } else {
      append_utf8(result, lowered);
    }
  }
  return result;
}

}  // namespace nmt::eval
