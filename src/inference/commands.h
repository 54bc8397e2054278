// `nmt translate`, `nmt evaluate` and `nmt score` as library functions: main.cpp parses the command line into
// these structs and calls them. Results go to `out` (standard output in nmt).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "config/translate_options.h"
#include "eval/bleu.h"
#include "inference/model.h"
#include "inference/outputs.h"
#include "search/forced_decoding.h"

namespace nmt {

// "\r1200/3000 sentences, 85.3 sentences/s" on standard error after each batch, for
// Translator::translate's `progress`: only when standard error is a terminal, not `quiet`, and
// `total` is at least 50 sentences (otherwise an empty function).
std::function<void(size_t)> progress_reporter(size_t total, bool quiet);

struct TranslateJob {
  TranslateOptions options;
  std::vector<std::string> inputs;  // files, or "-" for standard input (the default)
  std::string output = "-";         // a file, or "-" for `out`
  std::string output_dir;           // with several inputs: INPUT_NAME.hyp each here
  std::string prefix_file;          // target prefixes, one line per input line (search/translator.h)
  std::string constraints_file;     // terminology constraints, one line per input line (ditto)
  OutputOptions outputs;
  bool list_languages = false;  // print the model's target languages, one a line, and translate nothing
  // Called after each batch with the sentences of the input done so far; an exception from it ends
  // the translation, nothing written (the Python module's Ctrl-C). Empty: a progress line on a
  // terminal, unless options.quiet.
  std::function<void(size_t)> progress;
};

// Checks every path and option of `job` before any model is loaded, and sets what they imply
// (whether the search keeps attention).
void check_translate_job(TranslateJob& job);

// Translates each input of a checked job with `models`, loaded from job.options (load_models).
void translate_inputs(const TranslateJob& job, const TranslationModels& models, std::ostream& out);

// check_translate_job, load_models, translate_inputs.
void translate_files(TranslateJob job, std::ostream& out);

struct EvaluateJob {
  std::vector<std::string> hypothesis_files;
  std::vector<std::string> reference_files;
  std::string source_file;  // with translate.models: translate this, then score
  eval::BleuOptions bleu;
  std::string tokenize = "13a";  // 13a | none
  bool json = false;
  std::string output;          // with a model: also write the translation here
  TranslateOptions translate;  // no models: score hypothesis_files
};

// Prints corpus BLEU and chrF (sacreBLEU's signature lines, or one JSON object).
void evaluate_files(EvaluateJob job, std::ostream& out);

struct ScoreJob {
  TranslateOptions options;  // the models, checkpoints, device, threads, batch size, length penalty
  std::string source_file, target_file;
  std::string output = "-";  // a file, or "-" for `out`
  bool per_token = false;
};

// Forced decoding of every line pair (search/forced_decoding.h), read and written a block at a
// time: one line "score<TAB>log-probability<TAB>mean per token" per pair (the score as translate
// --with-scores gives it), with per_token a fourth column of each token's log-probability, EOS
// last. A pair of an empty source and an empty target scores 0, as translate gives an empty line.
// A translation that the search cut at its length cap ended without EOS, which forced decoding
// scores: its score here is lower than translate's. A file is written whole or not at all.
void score_files(const ScoreJob& job, std::ostream& out);

// The pairs score_files scores at a time (score_pairs on each block): memory stays bounded.
constexpr size_t kScoreBlock = 8192;

// The forced-decoding scores of line pairs with `models`, as score_files computes each line:
// options gives the length penalty, batch size and device. An empty source with an empty target
// scores 0 (no tokens).
std::vector<ForcedScore> score_pairs(const TranslationModels& models, const TranslateOptions& options,
                                     const std::vector<std::string>& sources, const std::vector<std::string>& targets);

// The token log-probabilities of each line's best translation (inference/outputs.h), by forced
// decoding of each sentence's translation with the sentence as its source: one more
// teacher-forced pass of `models`, on options' device, in batches of options' batch size.
std::vector<TokenLogProbabilities> best_token_log_probabilities(const TranslationModels& models,
                                                                const TranslateOptions& options,
                                                                const std::vector<Translation>& translations);

}  // namespace nmt
