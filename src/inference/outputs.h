// What `nmt translate` writes for each translated line: the text (optionally with its score), an
// n-best list ("i ||| text ||| score"), the hard alignment, and an attention heatmap (SVG) and
// matrix (JSON) per sentence (eval/attention_export.h).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "eval/attention_export.h"
#include "search/translator.h"
#include "text/vocabulary.h"

namespace nmt {

struct OutputOptions {
  bool jsonl = false;         // one JSON object a line (format_jsonl) instead of text
  bool with_scores = false;   // "score\ttext"
  bool alignment = false;     // an alignment line after each output line (with jsonl: a field)
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

// The model's log-probability of each token of a line's best translation, sentence by sentence:
// a sentence's tokens, then its end of sentence (nothing for a sentence without subwords).
using TokenLogProbabilities = std::vector<std::vector<double>>;

// What the model's probabilities say of a line's best translation: each word with its
// probability (the product of its subwords'; words cut where a subword starts a word), and the
// confidence, the geometric mean of all its token probabilities, each sentence's end included
// (NaN for a line without tokens: defined() is false).
struct LineConfidence {
  std::vector<std::pair<std::string, double>> words;
  double confidence = std::numeric_limits<double>::quiet_NaN();
  bool defined() const { return !std::isnan(confidence); }
};
LineConfidence line_confidence(const Translation& translation, const TokenLogProbabilities& log_probabilities,
                               const Vocabulary& target_vocabulary);

// --output-format jsonl: one JSON object per translated line, in order:
//   {"line": N (1-based, after first_line), "text", "score", "confidence", "words": [{"word",
//    "probability"}, ...], "sentences": [...], "capped": [...], "cut": [...], "alignment"?, "n_best"?}
// `token_log_probabilities[i]`: line i's (best_token_log_probabilities, inference/commands.h); the
// words and confidence as line_confidence gives them (confidence null for an empty line).
// "alignment" with options.alignment, "n_best" (text and score of each hypothesis) when
// n_best > 1; attention files as format_translations writes them.
std::string format_jsonl(const std::vector<std::string>& lines, const std::vector<Translation>& translations,
                         const std::vector<TokenLogProbabilities>& token_log_probabilities,
                         const Vocabulary& target_vocabulary, const std::string& stem, int n_best,
                         const OutputOptions& options, size_t first_line = 0);

}  // namespace nmt
