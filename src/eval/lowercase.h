// Python's str.lower() on UTF-8 text, the full (not just ASCII) case mapping, needed because
// sacreBLEU lowercases with it (sacrebleu/metrics/bleu.py, BLEU._preprocess_segment).
#pragma once

#include <string>

namespace nmt::eval {

// `text` as str.lower() lowercases it: final sigma and U+0130 included; bytes that are not
// valid UTF-8 pass through unchanged.
std::string python_lower(const std::string& text);

}  // namespace nmt::eval
