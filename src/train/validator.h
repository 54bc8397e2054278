// Validation on the development sets: mean token cross-entropy, perplexity, and BLEU and chrF of
// greedy translations, per dev set (a multilingual model has one per language pair) and over all
// of them (their mean, or best-pair's), in one result.
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

// One development set (config/train_config.h: DevSetSpec), read and encoded.
struct DevSet {
  std::string name;      // "de-en"
  std::string language;  // the target language whose token starts each source, or "" for none
  ParallelText text;
  TokenCorpus corpus;  // the pairs encoded (all of them are used), the language's token in front of each source
};

// A dev set's numbers.
struct DevScores {
  std::string name;
  double loss = 0;        // mean token cross-entropy (no label smoothing)
  double perplexity = 0;  // exp(loss)
  double bleu = 0;        // corpus BLEU of greedy translations against the dev references
  double chrf = 0;        // corpus chrF2 of the same translations
};

struct ValidationResult {
  // Over all dev sets: one's own numbers; of several, the mean of each (perplexity: exp of the mean
  // loss), or best-pair's numbers.
  double loss = 0;
  double perplexity = 0;
  double bleu = 0;
  double chrf = 0;
  std::vector<DevScores> sets;            // each dev set's, in dev-source's order
  std::vector<ValidationSample> samples;  // the first dev sentences, when asked (Validator::run)
  double samples_seconds = 0;             // translating them

  double metric(Metric which) const;
};

class Validator {
 public:
  // `best_pair`: the dev set whose numbers are the result's, or "" for their mean.
  Validator(Seq2Seq model, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
            std::vector<DevSet> dev_sets, std::string best_pair, int batch_tokens, int max_decode_ratio,
            torch::Device device);

  // Runs the model in evaluation mode, then puts it back in training mode. With `samples`, the
  // first that many sentences of the first dev set are translated again with their attention (a
  // model trained with attention none gives them without).
  ValidationResult run(size_t samples = 0);

 private:
  struct Set {
    DevSet dev;
    std::vector<std::vector<int64_t>> batches;
    Translator translator;
  };
  DevScores score(Set& set);
  std::vector<ValidationSample> translate_samples(size_t count);

  Seq2Seq model_;
  std::vector<Set> sets_;
  std::string best_pair_;
  Translator attending_;  // the first set's search, keeping the attention
  torch::Device device_;
};

}  // namespace nmt
