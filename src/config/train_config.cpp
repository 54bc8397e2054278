#include "config/train_config.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "config/fields.h"
#include "config/model_fields.h"
#include "text/corpus_mix.h"
#include "text/languages.h"
#include "text/sentences.h"
#include "util/runtime.h"

namespace nmt {
namespace {

// The keys of the data: corpora, dev sets, files, vocabulary and segmentation.
template <typename Visitor, typename Config>
void visit_data_fields(Visitor& visit, Config& config) {
  constexpr OnResume fixed = OnResume::kFixed;
  visit("train-source", config.train_source,
        "training corpora, source side: comma-separated entries, each a file or a glob and each one corpus", fixed);
  visit("train-target", config.train_target,
        "training corpora, target side: an entry per train-source entry, naming as many files in the same order",
        fixed);
  visit("train-weights", config.train_weights,
        "one weight per corpus, comma-separated: each epoch takes its pairs that many times (2 = twice, 0.5 = a new "
        "random half each epoch; empty: 1 each)",
        fixed);
  visit("train-tags", config.train_tags,
        "one tag per corpus, comma-separated, empty for none (',<bt>' tags the second): a token such as <bt> "
        "prepended to every source sentence of the corpus (tagged back-translation); translating needs no tag",
        fixed);
  visit("train-languages", config.train_languages,
        "one target language per corpus, comma-separated ('en,en,de'): a multilingual model, each source sentence "
        "starting with its corpus's token <2xx>, and translate choosing one with --target-language (empty: one "
        "target language, no token)",
        fixed);
  visit("train-temperature", config.train_temperature,
        "corpus shares by size instead of train-weights: corpus i takes n_i^(1/T) / sum n_j^(1/T) of each epoch "
        "and of the vocabulary's sample, T in [1, 1000] (1 = as they are, 5 = a small corpus gets more; 0 = off)",
        fixed);
  visit("reserved-tags", config.reserved_tags,
        "tags the vocabulary also reserves, comma-separated, for a later init-from run to give to train-tags or "
        "train-languages (<2it> for it)",
        fixed);
  visit("dev-source", config.dev_source,
        "development sets, source side: comma-separated, one per language pair, each validated on its own");
  visit("dev-target", config.dev_target, "development sets, target side: one per dev-source entry");
  visit("dev-languages", config.dev_languages,
        "the target language of each development set, comma-separated (empty: each dev-target file's extension, "
        "when train-languages is set)");
  visit("best-pair", config.best_pair,
        "the development set (de-en, from its files' extensions) whose metrics pick the best checkpoint, decay the "
        "learning rate and stop early (empty: the mean over all of them)",
        fixed);
  visit("model-dir", config.model_dir, "directory for vocabularies, checkpoints and logs");
  visit("corpus-dir", config.corpus_dir,
        "directory of the prepared training corpus and its vocabularies (nmt prepare; empty: model-dir)");
  visit("init-from", config.init_from,
        "fine-tuning: start from the weights and vocabularies of this checkpoint, or of this model directory's "
        "best.ckpt, with a fresh optimizer, schedule and step count (empty: from scratch)",
        fixed);

  visit("vocab-type", config.vocab_type, "sentencepiece model type", fixed);
  visit("vocab-size", config.vocab_size, "sentencepiece vocabulary size (upper bound)", fixed);
  visit("joint-vocab", config.joint_vocab, "one vocabulary for source and target", fixed);
  visit("byte-fallback", config.byte_fallback,
        "the vocabulary holds the 256 bytes, so that a character it lacks is spelt as its UTF-8 bytes, never <unk> "
        "(used when a vocabulary is built: a resumed run keeps its own)");
  visit("placeholder-share", config.placeholder_share,
        "share of training pairs with a span both sides hold (a name, a number, a URL; else one at the start or "
        "end) masked as a placeholder token, so that the model learns to copy the tokens translate gives it for "
        "protected spans (0: none, and the vocabulary has no tokens)",
        fixed);
  visit("max-length", config.max_length, "skip training pairs longer than this many subwords", fixed);
  visit("subword-alpha", config.subword_alpha,
        "subword regularisation: each epoch's pairs segmented anew, never validation's or translation's; unigram: "
        "drawn with P(x)^alpha (0.1 to 0.5 are usual), BPE: each merge dropped with probability alpha "
        "(BPE-dropout; 0.1 is usual); 0 = off",
        fixed);
  visit("subword-nbest", config.subword_nbest,
        "unigram subword-alpha: draw among this many best segmentations of each sentence (2..512; -1 = all of them)",
        fixed);
}

// The single list of configuration keys: visit(key, field, help, on_resume) for each.
template <typename Visitor, typename Config>
void visit_fields(Visitor& visit, Config& config) {
  constexpr OnResume fixed = OnResume::kFixed;
  visit_data_fields(visit, config);
  visit_model_fields(visit, config.model);

  visit("batch-tokens", config.batch_tokens, "padded source+target tokens per batch", fixed);
  visit("accumulate", config.accumulate,
        "batches summed into one update on each rank (gradient accumulation; the update's batch is "
        "accumulate x ranks batches)");
  visit("max-epochs", config.max_epochs, "stop after this many epochs");
  visit("max-steps", config.max_steps, "stop after this many updates (0 = no limit)");
  visit("max-minutes", config.max_minutes,
        "stop (after a last validation) once this run has trained this many minutes (0 = no limit)");
  visit("learning-rate", config.learning_rate, "Adam learning rate");
  visit("warmup-steps", config.warmup_steps, "linear learning-rate warm-up steps (0 = none)");
  visit("lr-decay-factor", config.lr_decay_factor, "learning-rate factor on a validation plateau");
  visit("lr-patience", config.lr_patience, "validations without improvement before a decay");
  visit("min-learning-rate", config.min_learning_rate, "the learning rate never decays below this");
  visit("clip-norm", config.clip_norm, "gradient-norm clipping threshold (0 = off)");
  visit("max-skipped-steps", config.max_skipped_steps,
        "stop the run after this many updates in a row skipped for a non-finite or diverged loss or gradient");
  visit("label-smoothing", config.label_smoothing, "label smoothing of the cross-entropy");
  visit("teacher-forcing", config.teacher_forcing,
        "probability of feeding the reference (not the predicted) previous token");

  visit("validate-every", config.validate_every, "validate every this many steps");
  visit("log-every", config.log_every, "log every this many steps");
  visit("best-metric", config.best_metric, "validation metric that picks the best checkpoint");
  visit("early-stopping-patience", config.early_stopping_patience,
        "stop after this many validations without improvement (0 = off)");
  visit("early-stopping-metrics", config.early_stopping_metrics,
        "metrics early stopping watches, comma-separated from bleu, chrf, loss, perplexity (empty = best-metric)");
  visit("early-stopping-on", config.early_stopping_on,
        "stop when the first of early-stopping-metrics, all of them or any has not improved for "
        "early-stopping-patience validations (first|all|any)");
  visit("min-improvement", config.min_improvement,
        "a validation improves a metric only when it beats the best so far by more than this, in each metric's "
        "own units (BLEU or chrF points, nats for loss, perplexity as it is); for the best checkpoint, early "
        "stopping and the learning-rate decay");
  visit("dev-max-decode-ratio", config.dev_max_decode_ratio, "dev decoding stops at ratio * source length + 10 tokens");
  visit("dev-max-length", config.dev_max_length,
        "a dev line longer than this many subwords is an error (validation memory grows with the longest line)");
  visit("keep-checkpoints", config.keep_checkpoints,
        "keep the weights of the last N validations as step-NNNNNNNN.ckpt, for nmt average (0 = none)");
  visit("shortlist", config.shortlist,
        "at the end of the run, write the lexical shortlist shortlist.bin into model-dir, as nmt shortlist does");

  visit("tensorboard", config.tensorboard,
        "directory of TensorBoard event files (tensorboard --logdir DIR): empty = MODEL_DIR/tensorboard, no = none");

  visit("seed", config.seed, "random seed (training is reproducible for a seed and thread count)", fixed);
  visit("threads", config.threads, "CPU threads (0 = number of cores)");
  visit("device", config.device, "cpu, cuda, or cuda:N (GPU N of those CUDA_VISIBLE_DEVICES shows)");
  visit("precision", config.precision,
        "fp32, or bf16: products in bfloat16 with float32 sums (a GPU: autocast; a CPU with AVX512_BF16 or AMX: the "
        "large ones, and with AMX the recurrent steps' too), weights, optimizer and loss in float32");
}

}  // namespace

void add_train_options(CLI::App& app, TrainConfig& config) {
  OptionAdder adder{app};
  visit_fields(adder, config);
}

std::vector<std::pair<std::string, std::string>> config_entries(const TrainConfig& config) {
  EntryWriter writer;
  visit_fields(writer, config);
  return writer.entries;
}

std::string to_toml(const TrainConfig& config) {
  TomlWriter writer;
  writer.out << "# nmt training configuration (written by nmt; readable by nmt train --config)\n[train]\n";
  visit_fields(writer, config);
  return writer.out.str();
}

TrainConfig config_from_entries(const std::vector<std::pair<std::string, std::string>>& entries) {
  TrainConfig config;
  CLI::App app;
  add_train_options(app, config);
  parse_entries(app, entries);
  config.model.target_languages = distinct_languages(config.train_languages);  // as the run had them
  return config;
}

namespace {

// The language code a file's extension gives (train.de: de), or "".
std::string extension_language(const std::string& file) {
  const std::string extension = std::filesystem::path(file).extension().string();
  return extension.size() > 1 && is_language_code(std::string_view(extension).substr(1)) ? extension.substr(1) : "";
}

}  // namespace

TrainConfig with_languages(TrainConfig config) {
  const auto from_extension = [](std::string& language, const std::string& corpora) {
    if (!language.empty() || corpora.empty()) return;
    const std::vector<std::string> entries = non_empty_items(corpora);
    if (entries.empty()) return;
    const std::string first = extension_language(entries.front());
    for (const std::string& entry : entries) {
      if (extension_language(entry) != first) return;  // several languages: none of them
    }
    language = first;
  };
  from_extension(config.model.source_language, config.train_source);
  config.model.target_languages = distinct_languages(config.train_languages);
  if (config.model.target_languages.size() > 1) return config;
  if (config.model.target_languages.size() == 1 && config.model.target_language.empty()) {
    config.model.target_language = config.model.target_languages.front();
  }
  from_extension(config.model.target_language, config.train_target);
  return config;
}

std::vector<DevSetSpec> dev_sets(const TrainConfig& config) {
  const std::vector<std::string> sources = non_empty_items(config.dev_source),
                                 targets = non_empty_items(config.dev_target);
  if (targets.size() != sources.size()) {
    throw std::invalid_argument("dev-target: " + std::to_string(targets.size()) + " entries but dev-source has " +
                                std::to_string(sources.size()) + "; give each dev set's target file at its position");
  }
  const std::vector<std::string> known = distinct_languages(config.train_languages);
  std::vector<std::string> languages;
  if (!config.dev_languages.empty()) {
    languages = split_commas(config.dev_languages);
    if (known.empty()) {
      throw std::invalid_argument(
          "dev-languages: the training corpora name no target languages (train-languages); leave it empty");
    }
    if (languages.size() != sources.size()) {
      throw std::invalid_argument("dev-languages: " + std::to_string(languages.size()) + " for " +
                                  std::to_string(sources.size()) +
                                  " dev sets in dev-source; give each one's target language, in order");
    }
  }
  std::vector<DevSetSpec> sets;
  for (size_t i = 0; i < sources.size(); ++i) {
    DevSetSpec set{sources[i], targets[i], languages.empty() ? "" : languages[i], ""};
    if (!known.empty()) {
      if (set.language.empty()) set.language = extension_language(set.target);
      if (set.language.empty()) {
        throw std::invalid_argument("dev-languages: " + set.target +
                                    " has no language code for an extension; give the target language of each dev "
                                    "set (train-languages names " +
                                    language_list(known) + ")");
      }
      if (std::find(known.begin(), known.end(), set.language) == known.end()) {
        throw std::invalid_argument("dev-languages: " + set.language + " (of " + set.target +
                                    ") is not among the languages of train-languages, " + language_list(known) +
                                    "; the model can translate into those only");
      }
    }
    const std::string from = extension_language(set.source);
    const std::string into = set.language.empty() ? extension_language(set.target) : set.language;
    std::string name = !from.empty() && !into.empty() ? from + "-" + into : "dev" + std::to_string(i + 1);
    const auto taken = [&sets](const std::string& candidate) {
      return std::any_of(sets.begin(), sets.end(), [&](const DevSetSpec& other) { return other.name == candidate; });
    };
    if (taken(name)) {
      int copy = 2;
      while (taken(name + "#" + std::to_string(copy))) ++copy;
      name += "#" + std::to_string(copy);
    }
    set.name = name;
    sets.push_back(std::move(set));
  }
  if (!config.best_pair.empty() &&
      std::none_of(sets.begin(), sets.end(), [&](const DevSetSpec& set) { return set.name == config.best_pair; })) {
    std::string names;
    for (const DevSetSpec& set : sets) names += (names.empty() ? "" : ", ") + set.name;
    throw std::invalid_argument("best-pair: '" + config.best_pair + "' is not a dev set; they are " + names +
                                " (empty: their mean)");
  }
  return sets;
}

std::vector<Metric> early_stopping_metrics(const TrainConfig& config) {
  if (config.early_stopping_metrics.empty()) return {config.best_metric};
  std::vector<Metric> metrics;
  for (const std::string& name : split_commas(config.early_stopping_metrics)) {
    const Metric metric = parse_enum(metric_names(), "early-stopping-metrics", name);
    if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) metrics.push_back(metric);
  }
  return metrics;
}

void validate(const TrainConfig& config) {
  const std::string unset = "is not set: give it in the config file or on the command line";
  require(!config.train_source.empty(), "train-source", unset);
  require(!config.train_target.empty(), "train-target", unset);
  check_corpus_lists(
      {config.train_source, config.train_target, config.train_weights, config.train_tags, config.train_languages});
  require(config.train_temperature == 0 || (config.train_temperature >= 1 && config.train_temperature <= 1000),
          "train-temperature", "must be 0 (off) or in [1, 1000]");
  require(config.train_temperature == 0 || config.train_weights.empty(), "train-temperature",
          "and train-weights both set the corpora's shares: give one of them");
  if (!config.reserved_tags.empty()) {
    for (const std::string& tag : split_commas(config.reserved_tags)) check_tag(tag, "reserved-tags");
  }
  require(!config.dev_source.empty(), "dev-source", unset);
  require(!config.dev_target.empty(), "dev-target", unset);
  dev_sets(config);  // throws naming a dev set's key
  require(!config.model_dir.empty(), "model-dir", unset);
  require(config.vocab_size >= 8 && config.vocab_size <= kMaxVocabularySize, "vocab-size",
          "must be in 8.." + std::to_string(kMaxVocabularySize));
  require(!config.byte_fallback || config.vocab_size >= kMinByteFallbackVocabulary, "byte-fallback",
          "needs vocab-size of at least " + std::to_string(kMinByteFallbackVocabulary) +
              " (256 of its pieces are the bytes): raise vocab-size, or set byte-fallback = false");
  require(config.placeholder_share >= 0 && config.placeholder_share <= 1, "placeholder-share", "must be in 0..1");
  require(config.max_length >= 1, "max-length", "must be at least 1");
  require(config.subword_alpha >= 0 && config.subword_alpha <= 1, "subword-alpha", "must be in [0, 1] (0 = off)");
  require(config.subword_nbest == -1 || (config.subword_nbest >= 2 && config.subword_nbest <= 512), "subword-nbest",
          "must be -1 (all segmentations) or in 2..512");
  validate(config.model);
  require(config.batch_tokens >= 2, "batch-tokens", "must be at least 2");
  require(config.accumulate >= 1, "accumulate", "must be at least 1");
  require(config.max_epochs >= 1, "max-epochs", "must be at least 1");
  require(config.max_steps >= 0, "max-steps", "must be >= 0 (0 = no limit)");
  require(config.max_minutes >= 0, "max-minutes", "must be >= 0 (0 = no limit)");
  require(config.learning_rate > 0, "learning-rate", "must be > 0");
  require(config.warmup_steps >= 0, "warmup-steps", "must be >= 0");
  require(config.lr_decay_factor > 0 && config.lr_decay_factor <= 1, "lr-decay-factor", "must be in (0, 1]");
  require(config.lr_patience >= 0, "lr-patience", "must be >= 0");
  require(config.min_learning_rate >= 0, "min-learning-rate", "must be >= 0");
  require(config.clip_norm >= 0, "clip-norm", "must be >= 0 (0 = off)");
  require(config.max_skipped_steps >= 1, "max-skipped-steps", "must be at least 1");
  require(config.label_smoothing >= 0 && config.label_smoothing < 1, "label-smoothing", "must be in [0, 1)");
  require(config.teacher_forcing >= 0 && config.teacher_forcing <= 1, "teacher-forcing", "must be in [0, 1]");
  require(config.validate_every >= 1, "validate-every", "must be at least 1");
  require(config.log_every >= 1, "log-every", "must be at least 1");
  require(config.early_stopping_patience >= 0, "early-stopping-patience", "must be >= 0 (0 = off)");
  require(config.early_stopping_on == "first" || config.early_stopping_on == "all" || config.early_stopping_on == "any",
          "early-stopping-on", "must be first, all or any");
  require(config.min_improvement >= 0 && std::isfinite(config.min_improvement), "min-improvement", "must be >= 0");
  early_stopping_metrics(config);  // throws naming a metric that is none
  require(config.keep_checkpoints >= 0, "keep-checkpoints", "must be >= 0 (0 = none)");
  require(config.dev_max_length >= 1, "dev-max-length", "must be at least 1");
  require(config.dev_max_decode_ratio >= 1, "dev-max-decode-ratio", "must be at least 1");
  check_threads(config.threads);
  require(device_name_problem(config.device).empty(), "device", device_name_problem(config.device));
  require(config.precision == "fp32" || config.precision == "bf16", "precision",
          "'" + config.precision + "' is not one of fp32|bf16");
}

std::vector<std::string> keys_fixed_on_resume() {
  FixedKeyCollector fixed;
  TrainConfig config;
  visit_fields(fixed, config);
  return fixed.keys;
}

void check_resumable(const TrainConfig& requested, const TrainConfig& stored, const std::string& checkpoint) {
  const std::vector<std::string> fixed = keys_fixed_on_resume();
  const auto wanted = config_entries(requested);
  const auto had = config_entries(stored);
  for (size_t i = 0; i < wanted.size(); ++i) {
    const bool is_fixed = std::find(fixed.begin(), fixed.end(), wanted[i].first) != fixed.end();
    if (is_fixed && wanted[i].second != had[i].second) {
      throw std::invalid_argument(wanted[i].first + ": is " + wanted[i].second + " but " + checkpoint +
                                  " was trained with " + had[i].second +
                                  "; resume with the same value or start a new model-dir");
    }
  }
}

void check_fine_tunable(const ModelOptions& requested, const ModelOptions& stored, const std::string& checkpoint) {
  FixedKeyCollector fixed;
  EntryWriter wanted, had;
  visit_model_fields(fixed, requested);
  visit_model_fields(wanted, requested);
  visit_model_fields(had, stored);
  for (size_t i = 0; i < wanted.entries.size(); ++i) {
    const auto& [key, value] = wanted.entries[i];
    const bool is_fixed = std::find(fixed.keys.begin(), fixed.keys.end(), key) != fixed.keys.end();
    if (is_fixed && value != had.entries[i].second) {
      throw std::invalid_argument("init-from: " + key + " is " + value + " but " + checkpoint + " was trained with " +
                                  had.entries[i].second + "; fine-tuning keeps the model's shape: set " + key + " = " +
                                  had.entries[i].second + ", or leave init-from empty to train from scratch");
    }
  }
}

void check_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return;
  std::map<std::string, int> seen;  // "section.key" -> line
  std::string section, line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    if (line[start] == '[') {
      section =
          line.substr(start, line.find(']') == std::string::npos ? std::string::npos : line.find(']') - start + 1);
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    std::string key = line.substr(start, equals - start);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (const auto [earlier, inserted] = seen.emplace(section + key, number); !inserted) {
      throw std::invalid_argument(where + key + " is given twice (also on line " + std::to_string(earlier->second) +
                                  "); keep one");
    }
    const size_t value = line.find_first_not_of(" \t", equals + 1);
    if (value != std::string::npos && (line[value] == '"' || line[value] == '\'')) {
      const size_t close = line.find(line[value], value + 1);
      if (close == std::string::npos) {
        throw std::invalid_argument(where + key + ": the quoted value has no closing " + std::string(1, line[value]));
      }
    }
  }
}

}  // namespace nmt
