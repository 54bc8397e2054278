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

// One dev sentence's greedy translation with its attention, for TensorBoard's images and texts.
struct ValidationSample {
  std::string source, reference, translation;
  std::vector<std::vector<float>> attention;  // a row per output token and EOS, a column per source token and EOS
};

struct ValidationResult {
  double loss = 0;                        // mean token cross-entropy (no label smoothing)
  double perplexity = 0;                  // exp(loss)
  double bleu = 0;                        // corpus BLEU of greedy translations against the dev references
  double chrf = 0;                        // corpus chrF2 of the same translations
  std::vector<ValidationSample> samples;  // the first dev sentences, when asked (Validator::run)
  double samples_seconds = 0;             // translating them

  double metric(Metric which) const;
};

class Validator {
 public:
  // dev_corpus: the encoded dev pairs (all of them are used); dev_text: the same pairs as text.
  Validator(Seq2Seq model, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
            ParallelText dev_text, TokenCorpus dev_corpus, int batch_tokens, int max_decode_ratio,
            torch::Device device);

  // Runs the model in evaluation mode, then puts it back in training mode. With `samples`, the
  // first that many dev sentences are translated again with their attention (a model trained with
  // attention none gives them without).
  ValidationResult run(size_t samples = 0);

 private:
  Seq2Seq model_;
  std::vector<ValidationSample> translate_samples(size_t count);

  ParallelText dev_text_;
  TokenCorpus dev_corpus_;
  std::vector<std::vector<int64_t>> dev_batches_;
  Translator translator_;
  Translator attending_;  // translator_'s search, keeping the attention
  torch::Device device_;
};

}  // namespace nmt
