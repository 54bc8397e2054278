#include "text/masking.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <random>
#include <vector>

#include "text/protect.h"
#include "text/special_tokens.h"
#include "text/utf8.h"

namespace nmt {
namespace masking {  // named: no clash with other files of a unity build

bool blank(char c) { return c == ' ' || c == '\t'; }

bool alphanumeric_at(const std::string& text, size_t at) {
  return u_isalnum(static_cast<UChar32>(next_code_point(text, at)));
}

// The words of `text` that look like names or numbers (a capital letter or a digit; two
// characters at least, or a digit), but for the first, without the punctuation around them.
std::vector<TextSpan> name_words(const std::string& text) {
  std::vector<TextSpan> words;
  bool first = true;
  for (size_t position = 0; position < text.size();) {
    while (position < text.size() && blank(text[position])) ++position;
    size_t begin = position;
    while (position < text.size() && !blank(text[position])) ++position;
    size_t end = position;
    if (begin == end) break;
    const bool was_first = first;
    first = false;
    // From its first to its last letter or digit.
    while (begin < end && !alphanumeric_at(text, begin)) next_code_point(text, begin);
    while (end > begin) {
      size_t back = end - 1;
      while (back > begin && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
      if (alphanumeric_at(text, back)) break;
      end = back;
    }
    if (was_first || begin >= end) continue;
    bool name = false;
    size_t characters = 0;
    for (size_t at = begin; at < end; ++characters) {
      const auto c = static_cast<UChar32>(next_code_point(text, at));
      name = name || u_isupper(c) || u_isdigit(c);
    }
    if (!name || (characters < 2 && !u_isdigit(static_cast<unsigned char>(text[begin])))) continue;
    words.push_back({begin, end, "name"});
  }
  return words;
}

// The spans of `text` that masking may take: the built-in kinds, and names where no such span is.
std::vector<TextSpan> mask_candidates(const Framer& framer, const std::string& text) {
  std::vector<TextSpan> spans = framer.spans(text);
  for (const TextSpan& word : name_words(text)) {
    const bool overlaps = std::any_of(spans.begin(), spans.end(), [&](const TextSpan& span) {
      return span.begin < word.end && word.begin < span.end;
    });
    if (!overlaps) spans.push_back(word);
  }
  std::sort(spans.begin(), spans.end(), [](const TextSpan& a, const TextSpan& b) { return a.begin < b.begin; });
  return spans;
}

std::string span_text(const std::string& text, const TextSpan& span) {
  return text.substr(span.begin, span.end - span.begin);
}

// Where a token goes before the final punctuation of `text` (its end when it has none).
size_t before_final_punctuation(const std::string& text) {
  size_t end = text.size();
  while (end > 0 && blank(text[end - 1])) --end;
  while (end > 0 && (text[end - 1] == '.' || text[end - 1] == '!' || text[end - 1] == '?')) --end;
  while (end > 0 && blank(text[end - 1])) --end;
  return end;
}

// `text` with the spans (in text order) replaced by `tokens`.
std::string with_tokens(const std::string& text, const std::vector<std::pair<TextSpan, std::string>>& spans) {
  std::string out;
  size_t copied = 0;
  for (const auto& [span, token] : spans) {
    out.append(text, copied, span.begin - copied);
    out += token;
    copied = span.end;
  }
  out.append(text, copied, std::string::npos);
  return out;
}

}  // namespace masking

PairMasker::PairMasker(double share, int seed)
    : share_(share),
      seed_(static_cast<uint64_t>(seed)),
      spans_(std::make_unique<const Framer>("none", "url,email,number,printf,braces,variable",
                                            std::vector<std::string>{}, Vocabulary{})) {}

PairMasker::~PairMasker() = default;
PairMasker::PairMasker(PairMasker&&) noexcept = default;
PairMasker& PairMasker::operator=(PairMasker&&) noexcept = default;

bool PairMasker::mask(std::string& source, std::string& target, uint64_t index) const {
  if (share_ <= 0 || source.empty() || target.empty()) return false;
  // The pair's own generator: the same pairs and choices whatever the threads or the order.
  std::mt19937_64 generator(seed_ * 0x9E3779B97F4A7C15ULL + index);
  if (std::uniform_real_distribution<double>(0.0, 1.0)(generator) >= share_) return false;
  if (source.find(kPlaceholderOpen) != std::string::npos || target.find(kPlaceholderOpen) != std::string::npos) {
    return false;
  }

  // The spans both sides hold once, with the same text.
  const std::vector<TextSpan> in_source = masking::mask_candidates(*spans_, source),
                              in_target = masking::mask_candidates(*spans_, target);
  std::vector<std::pair<TextSpan, TextSpan>> shared;
  for (const TextSpan& span : in_source) {
    const std::string text = masking::span_text(source, span);
    const auto same = [&](const std::vector<TextSpan>& spans, const std::string& side) {
      return std::count_if(spans.begin(), spans.end(),
                           [&](const TextSpan& s) { return masking::span_text(side, s) == text; });
    };
    if (same(in_source, source) != 1 || same(in_target, target) != 1) continue;
    const auto there = std::find_if(in_target.begin(), in_target.end(),
                                    [&](const TextSpan& s) { return masking::span_text(target, s) == text; });
    shared.emplace_back(span, *there);
    if (static_cast<int>(shared.size()) == kPlaceholderTokens) break;
  }
  const auto count = static_cast<int>(std::max<size_t>(1, shared.size()));
  const int first = std::uniform_int_distribution<int>(1, kPlaceholderTokens - count + 1)(generator);
  if (shared.empty()) {
    const std::string token = placeholder_token(first);
    if (std::uniform_int_distribution<int>(0, 1)(generator) == 0) {
      source = token + " " + source;
      target = token + " " + target;
    } else {
      source.insert(masking::before_final_punctuation(source), " " + token);
      target.insert(masking::before_final_punctuation(target), " " + token);
    }
    return true;
  }
  std::vector<std::pair<TextSpan, std::string>> source_spans, target_spans;
  for (size_t i = 0; i < shared.size(); ++i) {
    const std::string token = placeholder_token(first + static_cast<int>(i));
    source_spans.emplace_back(shared[i].first, token);
    target_spans.emplace_back(shared[i].second, token);
  }
  std::sort(target_spans.begin(), target_spans.end(),
            [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
  source = masking::with_tokens(source, source_spans);
  target = masking::with_tokens(target, target_spans);
  return true;
}

}  // namespace nmt
