// Spans a translation must give back exactly, once each: URLs, e-mail addresses, numbers (with
// their separators and units as written), printf conversions (%s, %1$d, %.2f), braces ({name},
// {0}), variables (${var}, $var), words with characters the source vocabulary lacks, and any
// pattern the user gives (an ICU regular expression). They are taken out of the text before
// translation and put back by the attention (text/frame.h), so the model never sees them; or,
// for a model whose vocabulary has placeholder tokens (trained with placeholder-share, whose
// training pairs taught it to copy them: text/masking.h), each is replaced by a token, ｟1｠,
// ｟2｠, ..., and goes back where the model writes it.
//
// A Framer makes each line's Frame: its markup read out (text/markup.h), then its protected
// spans taken out; of spans that overlap, the user's patterns' go before the built-in kinds', and
// then the leftmost, the longer at one place.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/frame.h"
#include "text/markup.h"
#include "text/vocabulary.h"

namespace nmt {

// The built-in kinds of protected spans, in the order of --placeholders' help.
const std::vector<std::string>& placeholder_kinds();  // url, email, number, printf, braces, variable, unknown

class Framer {
 public:
  // `placeholders`: "all", "none", or a comma-separated list of placeholder_kinds(); `patterns`:
  // ICU regular expressions; `placeholder_tokens`: spans go to the model as placeholder tokens
  // when the vocabulary has them (no: they are always taken out). Throws std::invalid_argument
  // naming the option (--markup, --placeholders, --protect) of a value that is wrong.
  Framer(const std::string& markup, const std::string& placeholders, const std::vector<std::string>& patterns,
         Vocabulary source_vocabulary, bool placeholder_tokens = true);

  // The same with another markup ("none", "html", "xml").
  Framer with_markup(const std::string& markup) const;

  // `line`'s Frame. Safe to call from several threads at once.
  Frame frame(std::string_view line) const;

  // The spans of `text` to protect, in text order, none overlapping.
  std::vector<TextSpan> spans(std::string_view text) const;

  Markup markup() const { return markup_; }
  // How many spans of a line go to the model as placeholder tokens (0: none, all taken out).
  int placeholder_tokens() const { return tokens_; }

 private:
  struct Patterns;

  Markup markup_ = Markup::kNone;
  std::shared_ptr<const Patterns> patterns_;
  bool unknown_ = false;  // protect words with characters the vocabulary lacks
  int tokens_ = 0;        // spans a line gives the model as placeholder tokens
  Vocabulary vocabulary_;
};

}  // namespace nmt
