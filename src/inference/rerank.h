// nmt rerank: an n-best list (translate --n-best) rescored by several models, each on its own
// (left-to-right and right-to-left ones, reverse-target), and the best hypothesis of each sentence
// by the weighted sum of their scores. The weights are given, or chosen for BLEU on a tuning set.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "config/translate_options.h"

namespace nmt {

struct RerankJob {
  TranslateOptions options;             // the models (each scores alone), device, threads, batch size, alpha
  std::string source_file, nbest_file;  // the sentences and their n-best list ("i ||| text ||| score")
  std::vector<double> weights;          // one per model; none: 1 each, or tuned
  // All three or none: the weights that give the best BLEU on these (a dev set's n-best list).
  std::string tune_source, tune_nbest, tune_reference;
  std::string output = "-";  // a file, or "-" for `out`
};

// Writes the chosen hypothesis of every source line (an empty line where the list has none); the
// weights and, when tuned, their BLEU go to `log`. Errors name the file and line.
void rerank_files(const RerankJob& job, std::ostream& out, std::ostream& log);

// The n-best list of `sentences` sentences: every sentence's hypotheses in their order. Lines are
// "i ||| text ||| score" with i from 0, ascending; anything else is an error naming path:line.
std::vector<std::vector<std::string>> read_nbest(const std::string& path, size_t sentences);

}  // namespace nmt
