// UTF-8 decoding and encoding, shared by the corpus reader, the BLEU/chrF
// tokenizers and the attention files.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nmt {

constexpr char32_t kReplacementCharacter = 0xFFFD;

// Decodes the code point starting at text[position] and advances `position`
// past it. Follows the well-formed byte sequences of the Unicode Standard
// (table 3-7): a malformed or truncated sequence (overlong forms, UTF-16
// surrogates, values above U+10FFFF) consumes one byte, decodes to U+FFFD and
// sets *valid to false, so any byte string can be read without throwing.
char32_t next_code_point(std::string_view text, std::size_t& position, bool* valid = nullptr);

// Appends the UTF-8 encoding of `code_point` to `output`.
void append_utf8(std::string& output, char32_t code_point);

// True when `text` is well-formed UTF-8.
bool is_valid_utf8(std::string_view text);

}  // namespace nmt
