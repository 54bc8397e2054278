// `nmt translate`, `nmt evaluate` and `nmt score` as library functions: main.cpp parses the command line into
// these structs and calls them. Results go to `out` (standard output in nmt).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "config/translate_options.h"
#include "eval/bleu.h"
#include "inference/outputs.h"

namespace nmt {

struct TranslateJob {
  TranslateOptions options;
  std::vector<std::string> inputs;  // files, or "-" for standard input (the default)
  std::string output = "-";         // a file, or "-" for `out`
  std::string output_dir;           // with several inputs: INPUT_NAME.hyp each here
  std::string prefix_file;          // target prefixes, one line per input line (search/translator.h)
  std::string constraints_file;     // terminology constraints, one line per input line (ditto)
  OutputOptions outputs;
};

// Checks every path and option before loading the model, then translates each input.
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

}  // namespace nmt
