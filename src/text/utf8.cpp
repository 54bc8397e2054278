#include "text/utf8.h"

namespace nmt {

// Follows the well-formed byte sequences of the Unicode Standard, table 3-7.
bool is_valid_utf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    int continuation = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      continuation = 1;
    } else if (lead == 0xE0) {
      continuation = 2, low = 0xA0;
    } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
      continuation = 2;
    } else if (lead == 0xED) {
      continuation = 2, high = 0x9F;  // excludes surrogates
    } else if (lead == 0xF0) {
      continuation = 3, low = 0x90;
    } else if (lead >= 0xF1 && lead <= 0xF3) {
      continuation = 3;
    } else if (lead == 0xF4) {
      continuation = 3, high = 0x8F;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(continuation) >= size) return false;  // truncated sequence
    if (bytes[i + 1] < low || bytes[i + 1] > high) return false;
    for (int k = 2; k <= continuation; ++k) {
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xBF) return false;
    }
    i += continuation + 1;
  }
  return true;
}

}  // namespace nmt
