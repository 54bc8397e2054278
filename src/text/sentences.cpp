#include "text/sentences.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/udata.h>
#include <unicode/unistr.h>
#include <unicode/ures.h>
#include <unicode/utext.h>

#include <algorithm>
#include <stdexcept>

#include "text/utf8.h"

namespace nmt {
namespace {

constexpr size_t npos = std::string_view::npos;

// The byte where white space at the end of text[begin, end) starts (end when there is none).
size_t trailing_space_start(std::string_view text, size_t begin, size_t end) {
  size_t kept = begin;
  for (size_t position = begin; position < end;) {
    const char32_t code_point = next_code_point(text, position);
    if (!u_isUWhiteSpace(static_cast<UChar32>(code_point))) kept = position;
  }
  return kept;
}

// The byte after white space at the start of text[begin, end).
size_t leading_space_end(std::string_view text, size_t begin, size_t end) {
  for (size_t position = begin; position < end;) {
    const size_t start = position;
    if (!u_isUWhiteSpace(static_cast<UChar32>(next_code_point(text, position)))) return start;
  }
  return end;
}

// CLDR's sentence-break exceptions of `language` as ICU's data holds them ("Dr.", "z.B.", "Mr."):
// the abbreviations after which a sentence does not end. None for a language without its own list.
std::vector<std::string> sentence_exceptions(const std::string& language) {
  std::vector<std::string> exceptions;
  UErrorCode status = U_ZERO_ERROR;
  UResourceBundle* bundle = ures_open(U_ICUDATA_NAME "-brkitr", language.c_str(), &status);
  const bool own = U_SUCCESS(status) && status != U_USING_FALLBACK_WARNING && status != U_USING_DEFAULT_WARNING;
  UResourceBundle* all = own ? ures_getByKey(bundle, "exceptions", nullptr, &status) : nullptr;
  UResourceBundle* list =
      all != nullptr && U_SUCCESS(status) ? ures_getByKey(all, "SentenceBreak", nullptr, &status) : nullptr;
  if (list != nullptr && U_SUCCESS(status)) {
    for (int32_t i = 0; i < ures_getSize(list); ++i) {
      int32_t length = 0;
      const UChar* text = ures_getStringByIndex(list, i, &length, &status);
      if (U_FAILURE(status)) break;
      std::string exception;
      icu::UnicodeString(text, length).toUTF8String(exception);
      exceptions.push_back(std::move(exception));
    }
  }
  ures_close(list);
  ures_close(all);
  ures_close(bundle);
  return exceptions;
}

// The code point that ends at text[end] (exclusive), or 0 at the start.
char32_t code_point_before(std::string_view text, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return next_code_point(text, start);
}

// The breaks `prototype` finds in `text`: a clone of it (an iterator keeps its text) over a UTF-8
// UText, whose indices are byte offsets; the UText is closed with it. `what` names the text in
// ICU's error.
class Breaks {
 public:
  Breaks(const icu::BreakIterator& prototype, std::string_view text, const char* what) : iterator_(prototype.clone()) {
    UErrorCode status = U_ZERO_ERROR;
    text_ = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
    iterator_->setText(text_, status);
    if (U_FAILURE(status)) {
      utext_close(text_);
      throw std::runtime_error(std::string("ICU could not read ") + what + ": " + u_errorName(status));
    }
  }
  ~Breaks() { utext_close(text_); }
  Breaks(const Breaks&) = delete;
  Breaks& operator=(const Breaks&) = delete;

  icu::BreakIterator* operator->() const { return iterator_.get(); }

 private:
  std::unique_ptr<icu::BreakIterator> iterator_;
  UText* text_ = nullptr;
};

// "de" of "de", "de-CH" or "de_CH".
std::string_view language_part(std::string_view code) { return code.substr(0, code.find_first_of("-_")); }

}  // namespace

bool is_language_code(std::string_view code) {
  if (code.size() < 2 || code.size() > 3) return false;
  if (!std::all_of(code.begin(), code.end(), [](char c) { return c >= 'a' && c <= 'z'; })) return false;
  for (const char* const* known = icu::Locale::getISOLanguages(); *known != nullptr; ++known) {
    if (code == *known) return true;
  }
  // ICU lists two-letter codes; a three-letter one counts when ICU maps a two-letter code to it.
  for (const char* const* known = icu::Locale::getISOLanguages(); *known != nullptr; ++known) {
    if (code == icu::Locale(*known).getISO3Language()) return true;
  }
  return false;
}

std::string language_problem(std::string_view language) {
  if (language.empty()) return "";
  const std::string_view base = language_part(language);
  const std::string_view region = language.substr(std::min(language.size(), base.size() + 1));
  const bool region_ok =
      base.size() == language.size() ||
      (region.size() == 2 && std::all_of(region.begin(), region.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
  if (is_language_code(base) && region_ok) return "";
  return "\"" + std::string(language) +
         "\" is not an ISO 639 language code: give one such as de, en or fr (a region may follow, as in pt-BR)";
}

SentenceSplitter::SentenceSplitter(std::string language) : language_(std::move(language)) {
  if (const std::string problem = language_problem(language_); !problem.empty()) {
    throw std::invalid_argument("source language " + problem);
  }
  const std::string_view base = language_part(language_);
  const std::string_view region = std::string_view(language_).substr(std::min(language_.size(), base.size() + 1));
  const std::string locale_name =
      language_.empty() ? "und" : std::string(base) + (region.empty() ? "" : "_" + std::string(region));
  UErrorCode status = U_ZERO_ERROR;
  prototype_.reset(icu::BreakIterator::createSentenceInstance(icu::Locale(locale_name.c_str()), status));
  if (U_FAILURE(status) || !prototype_) {
    throw std::runtime_error("ICU could not make a sentence splitter for \"" + locale_name +
                             "\": " + u_errorName(status));
  }
  if (!language_.empty()) abbreviations_ = sentence_exceptions(std::string(base));
}

SentenceSplitter::~SentenceSplitter() = default;

SplitLine SentenceSplitter::split(std::string_view line) const {
  if (!is_valid_utf8(line)) throw std::invalid_argument("is not valid UTF-8: convert the file to UTF-8");
  SplitLine result;
  const Breaks iterator(*prototype_, line, "a line");
  size_t gap_start = 0;          // where the text since the last sentence began
  size_t sentence_start = npos;  // where the sentence being gathered began, npos for none
  for (int32_t start = iterator->first(), end = iterator->next(); end != icu::BreakIterator::DONE;
       start = end, end = iterator->next()) {
    const size_t begin = leading_space_end(line, static_cast<size_t>(start), static_cast<size_t>(end));
    const size_t stop = trailing_space_start(line, begin, static_cast<size_t>(end));
    if (begin == stop) continue;  // white space only: part of the gap
    if (sentence_start == npos) sentence_start = begin;
    // A break after an abbreviation is none: the sentence goes on into the next part.
    if (static_cast<size_t>(end) < line.size() && ends_with_abbreviation(line.substr(0, stop), sentence_start))
      continue;
    result.gaps.emplace_back(line.substr(gap_start, sentence_start - gap_start));
    result.sentences.emplace_back(line.substr(sentence_start, stop - sentence_start));
    gap_start = stop;
    sentence_start = npos;
  }
  if (sentence_start != npos) {  // an abbreviation, then only white space
    const size_t stop = trailing_space_start(line, sentence_start, line.size());
    result.gaps.emplace_back(line.substr(gap_start, sentence_start - gap_start));
    result.sentences.emplace_back(line.substr(sentence_start, stop - sentence_start));
    gap_start = stop;
  }
  result.gaps.emplace_back(line.substr(gap_start));
  return result;
}

bool SentenceSplitter::ends_with_abbreviation(std::string_view text, size_t sentence_start) const {
  for (const std::string& abbreviation : abbreviations_) {
    if (text.size() - sentence_start < abbreviation.size() ||
        text.compare(text.size() - abbreviation.size(), abbreviation.size(), abbreviation) != 0) {
      continue;
    }
    // The whole word: "Dr." ends "Mit Dr.", but "r." does not end "Vater.".
    const char32_t before = code_point_before(text, text.size() - abbreviation.size());
    if (before == 0 || !(u_isalnum(static_cast<UChar32>(before)) || before == '.' || before == '-')) return true;
  }
  return false;
}

namespace {

// How surely a clause ends with `code_point`: 2 for a semicolon or colon, 1 for a comma (with
// their CJK, fullwidth and Arabic forms), 0 for anything else.
int clause_end(char32_t code_point) {
  switch (code_point) {
    case U';':
    case U':':
    case U'\uFF1B':  // fullwidth semicolon
    case U'\uFF1A':  // fullwidth colon
    case U'\u061B':  // Arabic semicolon
      return 2;
    case U',':
    case U'\u3001':  // ideographic comma
    case U'\uFF0C':  // fullwidth comma
    case U'\u060C':  // Arabic comma
      return 1;
    default:
      return 0;
  }
}

// How many parts packing `chunks` (subwords each) in order gives with at most `limit` subwords to
// a part (a chunk longer than that is a part alone); the index of each part's first chunk in
// `starts` when given.
size_t pack(const std::vector<size_t>& chunks, size_t limit, std::vector<size_t>* starts = nullptr) {
  size_t parts = 0, filled = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (parts == 0 || filled + chunks[i] > limit) {
      ++parts;
      filled = 0;
      if (starts != nullptr) starts->push_back(i);
    }
    filled += chunks[i];
  }
  return parts;
}

}  // namespace

ClauseCutter::ClauseCutter(size_t most, std::function<size_t(std::string_view)> count)
    : most_(most), count_(std::move(count)) {
  if (most_ == 0) throw std::invalid_argument("ClauseCutter: parts of at least 1 subword");
  UErrorCode status = U_ZERO_ERROR;
  prototype_.reset(icu::BreakIterator::createLineInstance(icu::Locale::getRoot(), status));
  if (U_FAILURE(status) || !prototype_) {
    throw std::runtime_error(std::string("ICU could not make a line breaker: ") + u_errorName(status));
  }
}

ClauseCutter::~ClauseCutter() = default;

SplitLine ClauseCutter::cut(std::string_view sentence, size_t subwords) const {
  SplitLine whole{{std::string(sentence)}, {"", ""}};
  if (subwords <= most_ || !is_valid_utf8(sentence)) return whole;
  // The places to cut: after a clause's mark and the white space after it; those after a semicolon
  // or colon also in `strong`.
  std::vector<size_t> places{0}, strong{0};
  const Breaks iterator(*prototype_, sentence, "a sentence");
  for (int32_t from = iterator->first(), at = iterator->next(); at != icu::BreakIterator::DONE;
       from = at, at = iterator->next()) {
    const auto end = static_cast<size_t>(at);
    if (end >= sentence.size()) break;
    const size_t mark_end = trailing_space_start(sentence, static_cast<size_t>(from), end);
    const int how_sure = clause_end(code_point_before(sentence, mark_end));
    if (how_sure > 0) places.push_back(end);
    if (how_sure > 1) strong.push_back(end);
  }
  if (places.size() == 1) return whole;
  places.push_back(sentence.size());
  strong.push_back(sentence.size());
  // Semicolons and colons end clauses more surely than commas: they alone, when their parts are
  // all within `most`.
  bool within = false;
  if (strong.size() > 2 && strong.size() < places.size()) {
    SplitLine parts = cut_at(sentence, strong, within);
    if (within) return parts;
  }
  return cut_at(sentence, places, within);
}

SplitLine ClauseCutter::cut_at(std::string_view sentence, const std::vector<size_t>& places, bool& within) const {
  // Each chunk between two places, counted alone: a part's subwords are about its chunks' sum.
  std::vector<size_t> chunks;
  for (size_t i = 0; i + 1 < places.size(); ++i) {
    chunks.push_back(count_(sentence.substr(places[i], places[i + 1] - places[i])));
  }
  within = std::all_of(chunks.begin(), chunks.end(), [&](size_t chunk) { return chunk <= most_; });
  // The fewest parts within `most`, then the smallest limit that still gives no more of them.
  const size_t fewest = pack(chunks, most_);
  size_t low = 1, high = most_;
  while (low < high) {
    const size_t middle = low + (high - low) / 2;
    if (pack(chunks, middle) <= fewest) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  std::vector<size_t> starts;
  pack(chunks, low, &starts);
  starts.push_back(chunks.size());
  SplitLine parts;
  parts.gaps.emplace_back();
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    const size_t begin = places[starts[i]], end = places[starts[i + 1]];
    const size_t stop = trailing_space_start(sentence, begin, end);
    parts.sentences.emplace_back(sentence.substr(begin, stop - begin));
    parts.gaps.emplace_back(sentence.substr(stop, end - stop));
  }
  return parts;
}

SplitLine cut_sentences(const ClauseCutter& cutter, SplitLine split, const std::vector<size_t>& subwords,
                        std::vector<size_t>* origin) {
  if (subwords.size() != split.sentences.size()) {
    throw std::invalid_argument("cut_sentences: one count of subwords per sentence");
  }
  SplitLine result;
  result.gaps.push_back(split.gaps.front());
  if (origin != nullptr) origin->clear();
  for (size_t i = 0; i < split.sentences.size(); ++i) {
    SplitLine parts = cutter.cut(split.sentences[i], subwords[i]);
    const bool cut = parts.sentences.size() > 1;
    for (size_t j = 0; j < parts.sentences.size(); ++j) {
      if (cut) result.cut.push_back(result.sentences.size());
      if (origin != nullptr) origin->push_back(i);
      result.sentences.push_back(std::move(parts.sentences[j]));
      // The last part's own trailing white space (a line not split: the line's), then the gap.
      result.gaps.push_back(j + 1 < parts.sentences.size() ? std::move(parts.gaps[j + 1])
                                                           : parts.gaps[j + 1] + split.gaps[i + 1]);
    }
  }
  return result;
}

std::string join_sentences(const SplitLine& split, const std::vector<std::string>& translations) {
  if (translations.size() != split.sentences.size()) {
    throw std::invalid_argument("join_sentences: one translation per sentence");
  }
  if (split.sentences.empty()) return "";
  std::string line = split.gaps[0];
  for (size_t i = 0; i < translations.size(); ++i) line += translations[i] + split.gaps[i + 1];
  return line;
}

}  // namespace nmt
