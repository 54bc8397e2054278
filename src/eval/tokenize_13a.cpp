#include "eval/tokenize_13a.h"

namespace nmt::eval {
namespace detail {

std::size_t whitespace_length(std::string_view text, std::size_t position) {
  const std::size_t remaining = text.size() - position;
  const auto byte = [&](std::size_t offset) { return static_cast<unsigned char>(text[position + offset]); };
  const unsigned char first = byte(0);
  // ASCII part of Python's whitespace table (Objects/unicodeobject.c,
  // _Py_ascii_whitespace): \t \n \v \f \r, the \x1c-\x1f separators, space.
  if ((first >= 0x09 && first <= 0x0D) || (first >= 0x1C && first <= 0x20)) {
    return 1;
  }
  if (first < 0x80) {
    return 0;
  }
  // U+0085 (NEL) and U+00A0 (NO-BREAK SPACE): C2 85, C2 A0.
  if (first == 0xC2 && remaining >= 2) {
    return (byte(1) == 0x85 || byte(1) == 0xA0) ? 2 : 0;
  }
  if (remaining < 3) {
    return 0;
  }
  const unsigned char second = byte(1);
  const unsigned char third = byte(2);
  // U+1680 OGHAM SPACE MARK: E1 9A 80.
  if (first == 0xE1) {
    return (second == 0x9A && third == 0x80) ? 3 : 0;
  }
  if (first == 0xE2) {
    // U+2000-U+200A: E2 80 80-8A; U+2028, U+2029: E2 80 A8-A9;
    // U+202F: E2 80 AF.
    if (second == 0x80) {
      const bool is_space = (third >= 0x80 && third <= 0x8A) || third == 0xA8 || third == 0xA9 || third == 0xAF;
      return is_space ? 3 : 0;
    }
    // U+205F MEDIUM MATHEMATICAL SPACE: E2 81 9F.
    return (second == 0x81 && third == 0x9F) ? 3 : 0;
  }
  // U+3000 IDEOGRAPHIC SPACE: E3 80 80.
  if (first == 0xE3) {
    return (second == 0x80 && third == 0x80) ? 3 : 0;
  }
  return 0;
}

std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> pieces;
  std::size_t position = 0;
  std::size_t piece_start = 0;
  bool in_piece = false;
  while (position < text.size()) {
    const std::size_t space = whitespace_length(text, position);
    if (space > 0) {
      if (in_piece) {
        pieces.push_back(text.substr(piece_start, position - piece_start));
        in_piece = false;
      }
      position += space;
    } else {
      if (!in_piece) {
        piece_start = position;
        in_piece = true;
      }
      ++position;
    }
  }
  if (in_piece) {
    pieces.push_back(text.substr(piece_start));
  }
  return pieces;
}

std::string_view rstrip_whitespace(std::string_view text) {
  // Scan forward (whitespace is only recognisable from a character's first
  // byte) and remember where the last non-whitespace character ended.
  std::size_t content_end = 0;
  std::size_t position = 0;
  while (position < text.size()) {
    const std::size_t space = whitespace_length(text, position);
    if (space > 0) {
      position += space;
    } else {
      ++position;
      content_end = position;
    }
  }
  return text.substr(0, content_end);
}

}  // namespace detail

namespace {

// Python's str.replace(old, new): every non-overlapping occurrence, scanning
// left to right.
std::string replace_all(const std::string& text, std::string_view old_text, std::string_view new_text) {
  std::size_t match = text.find(old_text.data(), 0, old_text.size());
  if (match == std::string::npos) {
    return text;
  }
  std::string result;
  result.reserve(text.size());
  std::size_t copied = 0;
  while (match != std::string::npos) {
    result.append(text, copied, match - copied);
    result.append(new_text.data(), new_text.size());
    copied = match + old_text.size();
    match = text.find(old_text.data(), copied, old_text.size());
  }
  result.append(text, copied, std::string::npos);
  return result;
}

bool is_digit(char character) { return character >= '0' && character <= '9'; }

bool is_period_or_comma(char character) { return character == '.' || character == ','; }

// The character class of the first TokenizerRegexp rule,
// [\{-\~\[-\` -\&\(-\+\:-\@\/]: { | } ~, [ \ ] ^ _ `, space ! " # $ % &,
// ( ) * +, : ; < = > ? @ and /. Apostrophe, comma, dash, period, letters and
// digits are deliberately not in it.
bool is_13a_symbol(char character) {
  const auto byte = static_cast<unsigned char>(character);
  return (byte >= 0x7B && byte <= 0x7E) || (byte >= 0x5B && byte <= 0x60) || (byte >= 0x20 && byte <= 0x26) ||
         (byte >= 0x28 && byte <= 0x2B) || (byte >= 0x3A && byte <= 0x40) || byte == 0x2F;
}

// re.sub with a pattern of two one-character groups: wherever matches(a, b) holds for a pair of
// neighbouring bytes, the pair becomes `replacement` with '1' standing for a and '2' for b, and the
// scan resumes after b (re.sub's left-to-right, non-overlapping matches).
template <typename Matches>
std::string substitute_pairs(const std::string& text, Matches matches, std::string_view replacement) {
  std::string output;
  output.reserve(text.size() * 2);
  for (std::size_t index = 0; index < text.size();) {
    if (index + 1 < text.size() && matches(text[index], text[index + 1])) {
      for (const char character : replacement) {
        output += character == '1' ? text[index] : character == '2' ? text[index + 1] : character;
      }
      index += 2;
    } else {
      output += text[index++];
    }
  }
  return output;
}

}  // namespace

std::string tokenize_13a(const std::string& line) {
  // Language-independent part, in sacreBLEU's order
  // (sacrebleu/tokenizers/tokenizer_13a.py, Tokenizer13a.__call__). The
  // replacements run one after another, so "&amp;lt;" becomes "<" just as
  // it does there.
  std::string text = replace_all(line, "<skipped>", "");
  text = replace_all(text, "-\n", "");
  text = replace_all(text, "\n", " ");
  if (text.find('&') != std::string::npos) {
    text = replace_all(text, "&quot;", "\"");
    text = replace_all(text, "&amp;", "&");
    text = replace_all(text, "&lt;", "<");
    text = replace_all(text, "&gt;", ">");
  }

  // The four regex substitutions of sacrebleu/tokenizers/tokenizer_re.py,
  // applied to f' {line} '. Each pass reproduces re.sub's left-to-right,
  // non-overlapping matching: after a two-character match, scanning resumes
  // after the second character. Working on bytes is equivalent to working
  // on code points because every literal in the patterns is ASCII and
  // neither "." nor "," nor a digit can be a UTF-8 continuation byte.
  std::string padded;
  padded.reserve(text.size() + 2);
  padded += ' ';
  padded += text;
  padded += ' ';

  // Rule 1: ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '.
  std::string symbols_split;
  symbols_split.reserve(padded.size() * 2);
  for (const char character : padded) {
    if (is_13a_symbol(character)) {
      symbols_split += ' ';
      symbols_split += character;
      symbols_split += ' ';
    } else {
      symbols_split += character;
    }
  }

  // Rules 2 to 4: ([^0-9])([\.,]) -> '\1 \2 ' (period or comma not after a digit), then
  // ([\.,])([^0-9]) -> ' \1 \2' (not before a digit), then ([0-9])(-) -> '\1 \2 ' (a dash after a digit).
  const std::string after_non_digit = substitute_pairs(
      symbols_split, [](char first, char second) { return !is_digit(first) && is_period_or_comma(second); }, "1 2 ");
  const std::string before_non_digit = substitute_pairs(
      after_non_digit, [](char first, char second) { return is_period_or_comma(first) && !is_digit(second); }, " 1 2");
  const std::string dash_split = substitute_pairs(
      before_non_digit, [](char first, char second) { return is_digit(first) && second == '-'; }, "1 2 ");

  // ' '.join(line.split()): trim and collapse every whitespace run.
  std::string result;
  result.reserve(dash_split.size());
  for (const std::string_view token : detail::split_whitespace(dash_split)) {
    if (!result.empty()) {
      result += ' ';
    }
    result.append(token.data(), token.size());
  }
  return result;
}

}  // namespace nmt::eval
