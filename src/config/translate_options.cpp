#include "config/translate_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

#include "config/fields.h"
#include "text/sentences.h"
#include "util/runtime.h"

namespace nmt {
namespace {

// The single list of decoding options: visit(key, field, help) for each.
template <typename Visitor>
void visit_translate_fields(Visitor& visit, TranslateOptions& options) {
  SearchOptions& search = options.search;
  visit("beam-size", search.beam_size, "beam size (1 = greedy search)");
  visit("length-penalty", search.length_penalty, "GNMT length penalty alpha (0 = none)");
  visit("max-length-ratio", search.max_length_ratio,
        "a sentence's output stops at ratio x its source subwords (EOS included) + 10 subwords");
  visit("max-output-length", search.max_length,
        "a sentence's output stops at this many subwords, whatever its length (not training's max-length)");
  visit("ban-unk", Flag{search.ban_unk}, "never produce <unk>: the likeliest other subword takes its place");
  visit("sampling", Flag{search.sampling}, "draw each output token from the model's distribution (no beam)");
  visit("sampling-topk", search.sampling_topk, "sample from the k most probable tokens (0 = all; turns sampling on)");
  visit("sampling-topp", search.sampling_topp,
        "sample from the fewest tokens whose probabilities reach p (1 = all; below 1 turns sampling on)");
  visit("sampling-temperature", search.sampling_temperature,
        "sample from p^(1/T), renormalised (1 = as is; any other value turns sampling on)");
  visit("seed", search.seed, "seed of the draws when sampling: the same seed, input and batches draw the same");
  visit("split-sentences", options.text.split_sentences,
        "yes: cut each line into sentences (ICU's rules for the source language), translate them, and join their "
        "translations with the line's spacing; no: a line is one sentence");
  visit("source-language", options.text.source_language,
        "ISO 639 code of the input's language, for the sentence rules (\"\": the model's source-language key)");
  visit("target-language", options.text.target_language,
        "the language a multilingual model (trained with train-languages) translates into, by its ISO 639 code; "
        "\"\": its only one (nmt translate --model DIR --list-languages lists them)");
  visit("markup", Choice<std::string>{options.text.markup, {"none", "html", "xml"}},
        "inline tags and entities taken out before translation and put back around the words the attention ties "
        "to those they enclosed; the output is well-formed when the input is");
  visit("placeholders", options.text.placeholders,
        "spans given back exactly, placed by the attention: all, none, or some of "
        "url,email,number,printf,braces,variable,unknown (words with characters the vocabulary lacks)");
  visit("placeholder-tokens", Choice<std::string>{options.text.placeholder_tokens, {"auto", "no"}},
        "auto: a model trained with placeholder-share gets each protected span as a placeholder token and the span "
        "goes where it writes the token (by the attention where it writes none); no: spans are always placed by the "
        "attention");
  visit("cut-sentences", options.text.cut_sentences,
        "a sentence longer than this many subwords is translated in parts cut after commas, semicolons and "
        "colons: auto (the model's training max-length), no, or a number");
  visit("batch-size", options.batching.batch_size,
        "sentences (or tokens) per batch; each batch is cut further to fit --max-search-memory, and on a CPU with "
        "--shortlist to the shortlist's batch-sentences");
  visit("batch-type", Choice<std::string>{options.batch_type, {"sentences", "tokens"}}, "unit of --batch-size");
  visit("max-search-memory", options.batching.max_search_memory,
        "MiB one batch's search may hold (beams x sentences x vocabulary); larger batches are cut");
  visit("quiet", Flag{options.quiet}, "no progress line and no warnings of output caps on stderr (errors still come)");
  visit("threads", options.threads, "CPU threads (0 = number of cores)");
  visit("device", options.device, "cpu, cuda, or cuda:N (GPU N of those CUDA_VISIBLE_DEVICES shows)");
}

}  // namespace

void check_device_option(CLI::App& command) {
  command.get_option("--device")
      ->check(CLI::Validator([](const std::string& name) { return device_name_problem(name); }, "DEVICE"));
}

void add_translate_options(CLI::App& command, TranslateOptions& options) {
  OptionAdder adder{command};
  visit_translate_fields(adder, options);
  // The output cap's older name, from when it shared it with training's max-length.
  command.add_option("--max-length", options.search.max_length, "")->group("");
  check_device_option(command);
  command.add_option("--protect", options.text.protect,
                     "a regular expression (ICU's syntax) of more spans to give back exactly, as --placeholders "
                     "does; repeat it for several");
  command.add_option("--checkpoint", options.checkpoints,
                     "best (default), last, or a checkpoint path; several make an ensemble: one per --model, or "
                     "each of one --model's");
  command
      .add_option("--compute-type", options.compute_type,
                  "int8: weight matrices rounded to int8 per row and the encoder's and decoder's products in int8 (CPU "
                  "only); "
                  "default: int8 for an int8 export (nmt export), float32 otherwise")
      ->check(CLI::IsMember({"default", "float32", "int8"}))
      ->capture_default_str();
  command.add_option("--shortlist", options.shortlist,
                     "a lexical shortlist (nmt shortlist): each batch's output layer covers only its sentences' "
                     "candidate subwords and the most frequent ones");
  // Resolved after parsing, before anything reads it.
  command.callback([&options] { options.batching.batch_in_tokens = options.batch_type == "tokens"; });
}

void validate(const SearchOptions& options) {
  if (options.beam_size < 1) throw std::invalid_argument("--beam-size must be at least 1");
  if (options.length_penalty < 0) throw std::invalid_argument("--length-penalty must be >= 0 (0 = none)");
  if (options.max_length_ratio <= 0) throw std::invalid_argument("--max-length-ratio must be > 0");
  if (options.max_length < 1) throw std::invalid_argument("--max-output-length must be at least 1");
  if (options.sampling_topk < 0) throw std::invalid_argument("--sampling-topk must be >= 0 (0 = all tokens)");
  if (!(options.sampling_topp > 0 && options.sampling_topp <= 1)) {
    throw std::invalid_argument("--sampling-topp must be in (0, 1] (1 = all tokens)");
  }
  if (!(options.sampling_temperature > 0)) throw std::invalid_argument("--sampling-temperature must be > 0");
  if (options.samples() && options.n_best != 1) {
    throw std::invalid_argument("sampling draws one translation per sentence: --n-best must be 1");
  }
  if (options.n_best < 1 || options.n_best > options.beam_size) {
    throw std::invalid_argument("--n-best must be between 1 and --beam-size (" + std::to_string(options.beam_size) +
                                ")");
  }
}

void validate(const TextOptions& options) {
  if (const std::string problem = language_problem(options.source_language); !problem.empty()) {
    throw std::invalid_argument("--source-language " + problem);
  }
  cut_length(options, 0);  // throws for a value that is none of auto, no and a number
}

size_t cut_length(const TextOptions& options, int64_t trained_length) {
  const std::string& value = options.cut_sentences;
  if (value == "no") return 0;
  if (value == "auto") return static_cast<size_t>(std::max<int64_t>(trained_length, 0));
  size_t length = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
  if (error != std::errc() || end != value.data() + value.size() || length == 0 || length > 1000000) {
    throw std::invalid_argument("--cut-sentences '" + value +
                                "' is none of auto, no and a number of subwords from 1: give one of those");
  }
  return length;
}

void validate(const BatchingOptions& options) {
  if (options.batch_size < 1) throw std::invalid_argument("--batch-size must be at least 1");
  if (options.max_search_memory < 1) throw std::invalid_argument("--max-search-memory must be at least 1 (MiB)");
}

}  // namespace nmt
