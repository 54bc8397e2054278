#include "text/utf8.h"

namespace nmt {

char32_t next_code_point(std::string_view text, std::size_t& position, bool* valid) {
  const auto byte_at = [&text](std::size_t index) { return static_cast<unsigned char>(text[index]); };
  const unsigned char lead = byte_at(position);
  if (valid) *valid = true;
  if (lead < 0x80) {
    ++position;
    return lead;
  }
  const auto malformed = [&] {
    if (valid) *valid = false;
    ++position;
    return kReplacementCharacter;
  };
  std::size_t length = 0;
  char32_t code_point = 0;
  unsigned char lowest_second = 0x80, highest_second = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0F;
    if (lead == 0xE0) lowest_second = 0xA0;   // overlong
    if (lead == 0xED) highest_second = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07;
    if (lead == 0xF0) lowest_second = 0x90;   // overlong
    if (lead == 0xF4) highest_second = 0x8F;  // above U+10FFFF
  } else {
    return malformed();
  }
  if (position + length > text.size()) return malformed();
  for (std::size_t offset = 1; offset < length; ++offset) {
    const unsigned char continuation = byte_at(position + offset);
    const unsigned char lowest = offset == 1 ? lowest_second : 0x80;
    const unsigned char highest = offset == 1 ? highest_second : 0xBF;
    if (continuation < lowest || continuation > highest) return malformed();
    code_point = (code_point << 6) | (continuation & 0x3F);
  }
  position += length;
  return code_point;
}

void append_utf8(std::string& output, char32_t code_point) {
  if (code_point < 0x80) {
    output += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    output += static_cast<char>(0xC0 | (code_point >> 6));
    output += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    output += static_cast<char>(0xE0 | (code_point >> 12));
    output += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    output += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    output += static_cast<char>(0xF0 | (code_point >> 18));
    output += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    output += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    output += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

bool is_valid_utf8(std::string_view text) {
  std::size_t position = 0;
  bool valid = true;
  while (position < text.size() && valid) next_code_point(text, position, &valid);
  return valid;
}

}  // namespace nmt
