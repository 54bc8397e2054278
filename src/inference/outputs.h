// What `nmt translate` writes for each translated line: the text (optionally with its score), an
// n-best list ("i ||| text ||| score"), the hard alignment, and an attention heatmap (SVG) and
// matrix (JSON) per sentence (eval/attention_export.h).
#pragma once

#include <string>
#include <vector>

#include "eval/attention_export.h"
#include "search/translator.h"
#include "text/vocabulary.h"

namespace nmt {

struct OutputOptions {
  bool with_scores = false;   // "score\ttext"
  bool alignment = false;     // an alignment line after each output line
  std::string attention_dir;  // SVG and JSON per sentence, named STEM.NNNNN.{svg,json}; "" = none
};

// The attention of a translation's hypothesis with its source and target pieces (EOS included).
AttentionMatrix attention_matrix(const Translation& translation, const Hypothesis& hypothesis,
                                 const Vocabulary& target_vocabulary);

// The text output for `translations` of `lines` (the input named `stem`): n-best lines when
// n_best > 1, else one line each with what `options` adds. Attention files are written as a side
// effect when options.attention_dir is set. `first_line` is the 0-based number of lines[0] in the
// input (n-best lines and attention files are numbered by it).
std::string format_translations(const std::vector<std::string>& lines, const std::vector<Translation>& translations,
                                const Vocabulary& target_vocabulary, const std::string& stem, int n_best,
                                const OutputOptions& options, size_t first_line = 0);

}  // namespace nmt
