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
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::BreakIterator> iterator(prototype_->clone());
  UText* text = utext_openUTF8(nullptr, line.data(), static_cast<int64_t>(line.size()), &status);
  iterator->setText(text, status);
  if (U_FAILURE(status)) {
    utext_close(text);
    throw std::runtime_error(std::string("ICU could not read a line: ") + u_errorName(status));
  }
  size_t gap_start = 0;          // where the text since the last sentence began
  size_t sentence_start = npos;  // where the sentence being gathered began, npos for none
  for (int32_t start = iterator->first(), end = iterator->next(); end != icu::BreakIterator::DONE;
       start = end, end = iterator->next()) {
    // Indices of a UTF-8 UText are byte offsets.
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
  utext_close(text);
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
