// Validation on the development set: mean token cross-entropy, perplexity, and BLEU of greedy
// translations, in one result.
#pragma once

#include <torch/types.h>

#include <vector>

#include "config/enums.h"
#include "model/seq2seq.h"
#include "search/translator.h"
#include "text/corpus.h"
#include "text/token_corpus.h"

namespace nmt {

struct ValidationResult {
  double loss = 0;        // mean token cross-entropy (no label smoothing)
  double perplexity = 0;  // exp(loss)
  double bleu = 0;        // corpus BLEU of greedy translations against the dev references

  double metric(Metric which) const;
};

class Validator {
 public:
  // dev_corpus: the encoded dev pairs (all of them are used); dev_text: the same pairs as text.
  Validator(Seq2Seq model, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
            ParallelText dev_text, TokenCorpus dev_corpus, int batch_tokens, int max_decode_ratio,
            torch::Device device);

  // Runs the model in evaluation mode, then puts it back in training mode.
  ValidationResult run();

 private:
  Seq2Seq model_;
  ParallelText dev_text_;
  TokenCorpus dev_corpus_;
  std::vector<std::vector<int64_t>> dev_batches_;
  Translator translator_;
  torch::Device device_;
};

}  // namespace nmt
