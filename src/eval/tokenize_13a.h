// sacreBLEU-compatible "13a" tokenizer (the mteval-v13a.pl tokenization used
// by WMT) plus the small Python-compatible text helpers the metrics share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::eval {

// Tokenizes one segment exactly like sacreBLEU 2.x Tokenizer13a
// (sacrebleu/tokenizers/tokenizer_13a.py + tokenizer_re.py). Input and output
// are UTF-8; the 13a rules only look at ASCII characters so non-ASCII text
// passes through untouched except for Unicode whitespace, which is collapsed
// like Python's str.split() does.
std::string tokenize_13a(const std::string& line);

namespace detail {

// Byte length of the whitespace character starting at `position`, or 0 when
// the character there is not whitespace. "Whitespace" is Python 3's
// str.isspace() set (ASCII \t\n\v\f\r, \x1c-\x1f, space, U+0085, U+00A0,
// U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), because
// sacreBLEU splits and strips with Python's str methods.
std::size_t whitespace_length(std::string_view text, std::size_t position);

// Python's str.split() with no arguments: pieces between whitespace runs,
// never empty pieces. The views point into `text`.
std::vector<std::string_view> split_whitespace(std::string_view text);

// Python's str.rstrip() with no arguments.
std::string_view rstrip_whitespace(std::string_view text);

}  // namespace detail
}  // namespace nmt::eval
