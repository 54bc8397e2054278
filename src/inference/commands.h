// `nmt translate` and `nmt evaluate` as library functions: main.cpp parses the command line into
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

}  // namespace nmt
