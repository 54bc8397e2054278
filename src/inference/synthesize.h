// `nmt synthesize`: a synthetic parallel corpus from monolingual text, for training on it beside
// the real one (several corpora: text/corpus_mix.h).
//
// - Back-translation (Sennrich et al. 2016): a reverse model (trained target-to-source) translates
//   target-language text; its translations become the synthetic sources, the text the targets.
//   Sampled (Edunov et al. 2018: --sampling, top-k) or beam translations with noise make better
//   synthetic sources than plain beam search for large monolingual sets.
// - Forward translation: a model translates source-language text; its translations become the
//   targets. With the training sources as input and an ensemble as the model, that is sequence-level
//   knowledge distillation (Kim and Rush 2016); with new source text, self-training.
//
// Noise (Edunov et al. 2018; Lample et al. 2018) goes on the synthetic pair's source side, in either
// direction: each word deleted with one probability, replaced by a filler with another, and the
// words shuffled so that none moves more than max_shift positions.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "config/translate_options.h"

namespace nmt {

struct NoiseOptions {
  double delete_probability = 0;
  double blank_probability = 0;
  int max_shift = 0;  // 0: word order kept
  std::string blank = "<blank>";
  bool any() const { return delete_probability > 0 || blank_probability > 0 || max_shift > 0; }
};

// Throws std::invalid_argument naming the option for a probability outside [0, 1), a negative
// shift or an empty filler.
void validate(const NoiseOptions& noise);

// `line` with noise: its words (runs between spaces) deleted, replaced or shuffled as `noise`
// says, drawing from `generator`. A line never loses all its words: when every word was drawn for
// deletion, the first is kept.
std::string add_noise(const std::string& line, const NoiseOptions& noise, std::mt19937_64& generator);

struct SynthesizeJob {
  TranslateOptions options;        // the model(s) and the search: beam, sampling, int8, shortlist...
  std::string input;               // monolingual text, one sentence per line
  std::string translations;        // or input's translations, already made (line by line): no model
  std::string source_output;       // the synthetic corpus's source side
  std::string target_output;       // its target side, line by line with source_output
  std::string direction = "back";  // back: the input is target-language text; forward: source-language
  NoiseOptions noise;
};

struct SynthesizeSummary {
  int64_t lines = 0;    // input lines
  int64_t pairs = 0;    // written
  int64_t skipped = 0;  // an empty input line or an empty translation
};

// Checks the job's files and options before any model is loaded (a model, or translations, but not
// both): std::invalid_argument or FileNotFound naming the option.
void check_synthesize_job(const SynthesizeJob& job);

// Translates job.input (or takes job.translations) and writes the two sides and
// SOURCE_OUTPUT.origin.json (what made them: the direction, the models and the search or the
// translations' file and its own origin record, the noise, the input file's size and time, the
// counts). With the same seed, noise on translations already made gives the bytes that the search
// and that noise give in one run: one search serves a corpus with noise and one without.
// Each file is written under a temporary name and renamed; the origin file, written last, says the
// pair is whole.
SynthesizeSummary synthesize(const SynthesizeJob& job);

}  // namespace nmt
