// Decoding options: plain structs, declared once as command-line options (visit_translate_fields
// in translate_options.cpp, shared by `nmt translate`, `nmt evaluate --model` and nmt_bench) and
// checked once (validate) before search starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace nmt {

struct SearchOptions {
  int beam_size = 5;            // 1 = greedy
  double length_penalty = 1.0;  // GNMT alpha: score / ((5 + |y|) / 6)^alpha; 0 = none
  // The output caps of a sentence of S source subwords (EOS counted): min(ratio * S + 10,
  // max_length) output subwords; a search that reaches them ends there (Translation::capped).
  double max_length_ratio = 2.0;  // --max-length-ratio
  int max_length = 250;           // --max-output-length (also --max-length, its older name)
  int n_best = 1;                 // hypotheses returned per sentence (<= beam_size)
  bool ban_unk = false;           // never produce <unk>
  bool return_attention = false;  // keep the attention matrix of each returned hypothesis
  // Sampling (search/search.h, sample_search) instead of the most probable output: on with
  // `sampling` or any of the three below away from its default.
  bool sampling = false;
  int sampling_topk = 0;              // draw from the k most probable tokens (0 = all)
  double sampling_topp = 1.0;         // ... from the fewest whose probabilities reach p (1 = all)
  double sampling_temperature = 1.0;  // probabilities ~ p^(1/T) before those cuts
  int seed = 1;                       // the draws' seed: the same seed, input and batches draw the same
  uint64_t sampling_stream = 0;       // set per batch by the translator: each batch draws on its own

  bool samples() const { return sampling || sampling_topk > 0 || sampling_topp < 1.0 || sampling_temperature != 1.0; }
};

struct BatchingOptions {
  int batch_size = 64;  // sentences per batch, or tokens with batch_in_tokens
  bool batch_in_tokens = false;
  int max_search_memory = 1024;  // MiB one batch's search may hold; larger batches are cut (search/memory.h)
};

// How input lines become the sentences the model translates (text/sentences.h).
struct TextOptions {
  // Each line cut into sentences by ICU's rules for the source language; the sentences of a batch
  // are translated together and each line's translations joined with the line's own spacing.
  bool split_sentences = true;
  std::string source_language;  // an ISO 639 code; "": the model's source-language key
  // Inline markup taken out before translation and put back by the attention (text/markup.h).
  std::string markup = "none";  // none | html | xml
  // Spans given back exactly (text/protect.h): "all", "none", or a comma-separated list of kinds.
  std::string placeholders = "all";
  std::vector<std::string> protect;  // more such spans: ICU regular expressions (--protect)
  // Sentences longer than this many subwords cut at clause boundaries (text/sentences.h's
  // ClauseCutter): "auto" for the model's training max-length, "no", or a number.
  std::string cut_sentences = "auto";
  // Protected spans given to a model trained with placeholder-share as its placeholder tokens, put
  // back where it writes them: "auto" (when the vocabulary has them) or "no" (always taken out and
  // placed by the attention).
  std::string placeholder_tokens = "auto";
  // The language a multilingual model translates into (its token, text/languages.h, in front of
  // each sentence); "": a model's only one. A model trained without languages takes none.
  std::string target_language;
};

// Lines translated as they are: no splitting, no markup, no protected spans (validation during
// training, and the server's queue, whose lines come split and framed).
inline TextOptions whole_lines() { return TextOptions{false, "", "none", "none", {}, "no", "no", ""}; }

// Everything that says how a model translates: which checkpoint, search, batching, threads.
struct TranslateOptions {
  std::vector<std::string> models;       // model directories (from nmt train); several: an ensemble
  std::vector<std::string> checkpoints;  // best, last, or paths (inference/model.h); empty: best
  SearchOptions search;
  BatchingOptions batching;
  TextOptions text;
  std::string batch_type = "sentences";  // unit of batch_size: sentences | tokens
  int threads = 0;                       // 0 = number of cores
  std::string device = "cpu";            // cpu | cuda | cuda:N
  bool quiet = false;                    // no progress line on stderr
  std::string shortlist;                 // a lexical shortlist file (search/shortlist.h); empty: none
  std::string compute_type = "default";  // default | float32 | int8 (inference/model.h's load_models)
};

// Declares the options of `options` (all but models and n_best) on `command`.
void add_translate_options(CLI::App& command, TranslateOptions& options);

// Checks the command's --device option when the command line is read (util/runtime.h,
// device_name_problem): a wrong name stops the command before any work.
void check_device_option(CLI::App& command);

// Throws std::invalid_argument naming the option.
void validate(const SearchOptions& options);
void validate(const BatchingOptions& options);
void validate(const TextOptions& options);
// The subwords above which a sentence is cut (--cut-sentences) for a model trained within
// `trained_length` (ModelOptions::trained_length; 0: not known); 0 for none. Throws
// std::invalid_argument for a value that is none of auto, no and a number.
size_t cut_length(const TextOptions& options, int64_t trained_length);

}  // namespace nmt
