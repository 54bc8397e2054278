// Spans a translation must give back exactly, once each: URLs, e-mail addresses, numbers (with
// their separators and units as written), printf conversions (%s, %1$d, %.2f), braces ({name},
// {0}), variables (${var}, $var), words with characters the source vocabulary lacks, and any
// pattern the user gives (an ICU regular expression). They are taken out of the text before
// translation and put back by the attention (text/frame.h), so the model never sees them.
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
  // ICU regular expressions. Throws std::invalid_argument naming the option (--markup,
  // --placeholders, --protect) of a value that is wrong.
  Framer(const std::string& markup, const std::string& placeholders, const std::vector<std::string>& patterns,
         Vocabulary source_vocabulary);

  // The same with another markup ("none", "html", "xml").
  Framer with_markup(const std::string& markup) const;

  // `line`'s Frame. Safe to call from several threads at once.
  Frame frame(std::string_view line) const;

  Markup markup() const { return markup_; }

 private:
  struct Patterns;
  void protect(Frame& frame) const;

  Markup markup_ = Markup::kNone;
  std::shared_ptr<const Patterns> patterns_;
  bool unknown_ = false;  // protect words with characters the vocabulary lacks
  Vocabulary vocabulary_;
};

}  // namespace nmt
