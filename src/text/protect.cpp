#include "text/protect.h"

#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "text/special_tokens.h"
#include "text/utf8.h"

namespace nmt {
namespace {

// The built-in kinds as ICU regular expressions. A URL or e-mail address ends before the
// punctuation that follows it in a sentence; a number stands alone (no letter or digit next to it)
// and takes its currency sign and unit along.
const std::vector<std::pair<std::string, std::string>>& builtin_patterns() {
  static const std::vector<std::pair<std::string, std::string>> patterns = {
      {"url", R"((?:\b(?:https?|ftp)://|\bwww\.)[^\s<>"]*[^\s<>".,;:!?)\]}'»”])"},
      {"email", R"([\p{L}\p{N}._%+\-]+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)+)"},
      {"number",
       R"((?<![\p{L}\p{N}_])(?:[$€£¥]\s?)?[\-+]?\p{Nd}+(?:[.,'\u00A0\u202F]\p{Nd}+)*)"
       R"((?:\s?(?:%|‰|°[CF]?|km/h|kWh|[kMGT]?Hz|[kMGT]?B|[kmcµ]?[gmlsLW]|h|min|€|\$|£|¥))?(?![\p{L}\p{N}_]))"},
      {"printf", R"(%(?:\d+\$)?[\-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGaAcsp])"},
      {"braces", R"(\{\{[^{}\s]+\}\}|\{[\p{L}\p{N}_.:,\-]*\})"},
      {"variable", R"(\$\{[^{}\s]+\}|\$[A-Za-z_][A-Za-z0-9_]*)"},
  };
  return patterns;
}

struct Candidate {
  size_t begin, end;
  size_t priority;  // lower first
  std::string what;
};

bool is_letter_like(char32_t c) {
  const auto type = static_cast<UCharCategory>(u_charType(static_cast<UChar32>(c)));
  return u_isalnum(static_cast<UChar32>(c)) || type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK;
}

}  // namespace

struct Framer::Patterns {
  std::vector<std::pair<std::string, std::unique_ptr<icu::RegexPattern>>> compiled;  // user ones first
  size_t users = 0;                                                                  // how many those are
};

const std::vector<std::string>& placeholder_kinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> names;
    for (const auto& [name, pattern] : builtin_patterns()) names.push_back(name);
    names.push_back("unknown");
    return names;
  }();
  return kinds;
}

Framer::Framer(const std::string& markup, const std::string& placeholders, const std::vector<std::string>& patterns,
               Vocabulary source_vocabulary, bool placeholder_tokens)
    : vocabulary_(std::move(source_vocabulary)) {
  if (placeholder_tokens && vocabulary_.loaded()) tokens_ = vocabulary_.placeholder_tokens();
  *this = with_markup(markup);
  std::vector<std::string> kinds;
  if (placeholders == "all") {
    kinds = placeholder_kinds();
  } else if (placeholders != "none") {
    for (size_t start = 0; start <= placeholders.size();) {
      const size_t comma = std::min(placeholders.find(',', start), placeholders.size());
      const std::string kind = placeholders.substr(start, comma - start);
      start = comma + 1;
      const auto& known = placeholder_kinds();
      if (std::find(known.begin(), known.end(), kind) == known.end()) {
        std::string names;
        for (const std::string& name : known) names += (names.empty() ? "" : ",") + name;
        throw std::invalid_argument("--placeholders: '" + kind + "' is no kind of placeholder: all, none, or some of " +
                                    names);
      }
      kinds.push_back(kind);
    }
  }
  auto compiled = std::make_shared<Patterns>();
  const auto compile = [&](const std::string& name, const std::string& pattern, const std::string& option) {
    UParseError where{};
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexPattern> regex(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, where, status));
    if (U_FAILURE(status)) {
      throw std::invalid_argument(option + " '" + pattern + "' is no regular expression (" + u_errorName(status) +
                                  " at character " + std::to_string(where.offset + 1) +
                                  "): ICU's syntax, as in docs/documents.md");
    }
    compiled->compiled.emplace_back(name, std::move(regex));
  };
  for (const std::string& pattern : patterns) {
    if (pattern.empty()) throw std::invalid_argument("--protect: an empty pattern: give a regular expression");
    compile("protect", pattern, "--protect");
  }
  compiled->users = compiled->compiled.size();
  for (const auto& [name, pattern] : builtin_patterns()) {
    if (std::find(kinds.begin(), kinds.end(), name) != kinds.end()) compile(name, pattern, "built-in " + name);
  }
  unknown_ = std::find(kinds.begin(), kinds.end(), "unknown") != kinds.end() && vocabulary_.loaded();
  if (!compiled->compiled.empty()) patterns_ = std::move(compiled);
}

Framer Framer::with_markup(const std::string& markup) const {
  Framer framer = *this;
  framer.markup_ = parse_enum(markup_names(), "--markup", markup);
  return framer;
}

Frame Framer::frame(std::string_view line) const {
  Frame frame = read_markup(line, markup_);
  if (patterns_ || unknown_) {
    // Tokens only where the text has none of its own to be taken for them.
    const bool tokens = tokens_ > 0 && frame.text.find(kPlaceholderOpen) == std::string::npos;
    take_out(frame, spans(frame.text), tokens ? tokens_ : 0);
  }
  return frame;
}

std::vector<TextSpan> Framer::spans(std::string_view text) const {
  std::vector<Candidate> candidates;
  if (patterns_) {
    UErrorCode status = U_ZERO_ERROR;
    UText* input = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
    for (size_t p = 0; p < patterns_->compiled.size() && U_SUCCESS(status); ++p) {
      const auto& [name, pattern] = patterns_->compiled[p];
      std::unique_ptr<icu::RegexMatcher> matcher(pattern->matcher(status));
      if (U_FAILURE(status)) break;
      matcher->reset(input);
      while (matcher->find(status) && U_SUCCESS(status)) {
        const auto begin = static_cast<size_t>(matcher->start64(status));
        const auto end = static_cast<size_t>(matcher->end64(status));
        if (end > begin) candidates.push_back({begin, end, p, name});
      }
    }
    utext_close(input);
    if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU regular expressions: ") + u_errorName(status));
  }
  if (unknown_ && !text.empty()) {
    // Characters the vocabulary has no subword for (<unk>, or bytes), with the rest of their word
    // when they are letters: "Dvořák", "李明", "🙂".
    std::vector<ByteSpan> pieces;
    const std::vector<int64_t> ids = vocabulary_.encode(std::string(text), &pieces);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!vocabulary_.is_fallback(ids[i]) || pieces[i].end <= pieces[i].begin) continue;
      size_t begin = pieces[i].begin, end = pieces[i].end;
      while (begin < end && text[begin] == ' ') ++begin;
      if (begin >= end) continue;
      size_t position = begin;
      if (is_letter_like(next_code_point(text, position))) {
        while (begin > 0) {  // back to the word's start
          size_t back = begin - 1;
          while (back > 0 && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
          size_t at = back;
          if (!is_letter_like(next_code_point(text, at))) break;
          begin = back;
        }
        while (end < text.size()) {  // on to its end
          size_t next = end;
          if (!is_letter_like(next_code_point(text, next))) break;
          end = next;
        }
      }
      if (!candidates.empty() && candidates.back().what == "unknown" && candidates.back().end >= begin) {
        candidates.back().end = std::max(candidates.back().end, end);
      } else {
        candidates.push_back({begin, end, patterns_ ? patterns_->compiled.size() : 0, "unknown"});
      }
    }
  }
  if (candidates.empty()) return {};
  // The user's patterns first; then, and among them, the leftmost, the longest, the first kind.
  const size_t users = patterns_ ? patterns_->users : 0;
  std::sort(candidates.begin(), candidates.end(), [users](const Candidate& a, const Candidate& b) {
    if ((a.priority < users) != (b.priority < users)) return a.priority < users;
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return a.priority < b.priority;
  });
  std::map<size_t, TextSpan> chosen;  // by start, none overlapping
  for (const Candidate& candidate : candidates) {
    const auto next = chosen.lower_bound(candidate.begin);
    if (next != chosen.end() && next->second.begin < candidate.end) continue;
    if (next != chosen.begin() && std::prev(next)->second.end > candidate.begin) continue;
    chosen.emplace(candidate.begin, TextSpan{candidate.begin, candidate.end, candidate.what});
  }
  std::vector<TextSpan> out;
  for (auto& [begin, span] : chosen) out.push_back(std::move(span));
  return out;
}

}  // namespace nmt
