#pragma once

#include <string>

namespace nmt {

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool is_valid_utf8(const std::string& text);

}  // namespace nmt
