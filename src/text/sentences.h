// Lines cut into sentences by ICU's sentence rules (Unicode UAX #29) and the language's
// abbreviations from CLDR as ICU's data holds them, so that "Mr. Smith" or "z.B. Obst" does not end
// a sentence; and sentence translations joined back into a line with the line's own spacing.
//
// ICU's own filter of those abbreviations ("@ss=standard") matches them as any word's ending, so
// that in German every word ending in "r." ("Vater.", "Uhr.") would end no sentence; here an
// abbreviation counts only as a whole word.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/uversion.h>  // ICU's versioned namespace, for the declaration below

U_NAMESPACE_BEGIN
class BreakIterator;
U_NAMESPACE_END

namespace nmt {

// A line as sentences and the text between them: gaps[0] + sentences[0] + gaps[1] + ... +
// sentences[n-1] + gaps[n] is the line byte for byte. Sentences never start or end with white
// space; a line of white space only has no sentence and one gap.
struct SplitLine {
  std::vector<std::string> sentences;
  std::vector<std::string> gaps;  // sentences.size() + 1 entries
  // Indices of the sentences that are parts of a longer one (ClauseCutter), in order.
  std::vector<size_t> cut{};
};

class SentenceSplitter {
 public:
  // `language`: an ISO 639 code ("de", "en", "fr", ...) for its rules and abbreviations; "" for
  // the rules every language shares (no abbreviations). Throws std::invalid_argument when
  // language_problem finds one.
  explicit SentenceSplitter(std::string language);
  ~SentenceSplitter();
  SentenceSplitter(const SentenceSplitter&) = delete;
  SentenceSplitter& operator=(const SentenceSplitter&) = delete;

  const std::string& language() const { return language_; }

  // Throws std::invalid_argument when `line` is not well-formed UTF-8. Safe to call from several
  // threads at once.
  SplitLine split(std::string_view line) const;

 private:
  // Whether `text`, a sentence so far that began at byte sentence_start, ends with one of the
  // language's abbreviations as a whole word.
  bool ends_with_abbreviation(std::string_view text, size_t sentence_start) const;

  std::string language_;
  std::unique_ptr<icu::BreakIterator> prototype_;  // cloned per call: an iterator keeps its text
  std::vector<std::string> abbreviations_;
};

// Sentences longer than a model was trained on, cut into parts it was trained on: after a comma,
// semicolon or colon (with their CJK and Arabic forms) where ICU's line breaking allows a break
// (not inside "3,5" or "12:30"), into the fewest parts of at most `most` subwords each, as even as
// those places allow; after semicolons and colons alone when their parts are all within `most`.
class ClauseCutter {
 public:
  // `count`: the subwords of a text (the model's source vocabulary).
  ClauseCutter(size_t most, std::function<size_t(std::string_view)> count);
  ~ClauseCutter();
  ClauseCutter(const ClauseCutter&) = delete;
  ClauseCutter& operator=(const ClauseCutter&) = delete;

  size_t most() const { return most_; }

  // `sentence` (no white space at either end) as parts and the white space between
  // them (gaps "" at either end); one part, the sentence, when it has at most `most` subwords, no
  // place to cut, or is not valid UTF-8. A part with no place to cut inside may still be longer. Safe to call from
  // several threads at once.
  SplitLine cut(std::string_view sentence) const { return cut(sentence, count_(sentence)); }
  // The same for a sentence known to have `subwords` subwords.
  SplitLine cut(std::string_view sentence, size_t subwords) const;

 private:
  // `sentence` cut at some of `places` (0 first, its end last) into the fewest parts of at most
  // `most` subwords, as even as they allow; `within`: whether every part is within `most`.
  SplitLine cut_at(std::string_view sentence, const std::vector<size_t>& places, bool& within) const;

  size_t most_;
  std::function<size_t(std::string_view)> count_;
  std::unique_ptr<icu::BreakIterator> prototype_;  // cloned per call
};

// `split` with each sentence that `cutter` cuts replaced by its parts (SplitLine::cut naming them);
// `subwords[i]`: sentence i's subwords. `origin`, when given, gets for each sentence of the result
// the index in `split` of the sentence it is or is part of.
SplitLine cut_sentences(const ClauseCutter& cutter, SplitLine split, const std::vector<size_t>& subwords,
                        std::vector<size_t>* origin = nullptr);

// The line whose sentences `split` holds, with each sentence replaced by its translation (one per
// sentence, in order) and the gaps kept. A line without sentences joins to "".
std::string join_sentences(const SplitLine& split, const std::vector<std::string>& translations);

// Whether ICU knows `code` as an ISO 639 language code (two or three lowercase letters).
bool is_language_code(std::string_view code);

// "" when `language` is "" or a language code, optionally with a region ("de", "pt-BR", "pt_BR");
// else what is wrong with it, for an error message after the key's name.
std::string language_problem(std::string_view language);

}  // namespace nmt
