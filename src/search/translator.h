// Text in, text out: tokenizes, batches sentences by length, searches, and restores input order.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "config/translate_options.h"
#include "search/search.h"
#include "text/vocabulary.h"

namespace nmt {

struct Translation {
  std::vector<std::string> source_pieces;  // the source subwords (attention columns, without EOS)
  std::vector<Hypothesis> hypotheses;      // n-best, best first; empty for an empty input line
  std::vector<std::string> texts;          // detokenized text of each hypothesis
};

// Target prefixes for Translator::translate (search.h): one line per input line, an empty line
// for none; `name` (the file they come from) goes into errors.
struct TargetPrefixes {
  std::vector<std::string> lines;
  std::string name = "prefix";
};

class Translator {
 public:
  // `model`: one Seq2Seq, or an Ensemble of models that share the vocabularies.
  Translator(Ensemble model, Vocabulary source_vocabulary, Vocabulary target_vocabulary, SearchOptions search,
             BatchingOptions batching, torch::Device device);

  // One Translation per line, in input order. `progress(sentences_done)` runs after each batch.
  // With `prefixes`, each output starts with its line's prefix; a prefix that reaches its line's
  // output limit is an error naming prefixes.name and the line.
  std::vector<Translation> translate(const std::vector<std::string>& lines,
                                     const std::function<void(size_t)>& progress = {},
                                     const TargetPrefixes& prefixes = {});

 private:
  std::vector<std::vector<int64_t>> plan_batches(const std::vector<std::vector<int64_t>>& sources,
                                                 const std::vector<int64_t>& order) const;

  Ensemble model_;
  Vocabulary source_vocabulary_;
  Vocabulary target_vocabulary_;
  SearchOptions search_;
  BatchingOptions batching_;
  torch::Device device_;
};

// Best hypothesis text of each translation ("" for empty lines).
std::vector<std::string> best_texts(const std::vector<Translation>& translations);

}  // namespace nmt
