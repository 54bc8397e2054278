#include "train/setup.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>

#include "kernels/dispatch.h"
#include "model/linear/bf16_products.h"
#include "text/batching.h"
#include "text/corpus_mix.h"
#include "text/languages.h"
#include "text/special_tokens.h"
#include "train/gradient_reducer.h"
#include "train/loss.h"
#include "util/device_rules.h"
#include "util/format.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

std::vector<CorpusSpec> training_corpora(const TrainConfig& config) {
  return corpus_specs(
      {config.train_source, config.train_target, config.train_weights, config.train_tags, config.train_languages});
}

// The tags the source vocabulary reserves.
std::vector<std::string> source_tags(const TrainConfig& config) {
  return vocabulary_tags(training_corpora(config), config.reserved_tags);
}

std::string vocabulary_settings(const TrainConfig& config) {
  std::string tags;
  for (const std::string& tag : source_tags(config)) tags += (tags.empty() ? ", tags " : " ") + tag;
  return to_string(config.vocab_type) + " vocabulary of up to " + std::to_string(config.vocab_size) + " pieces, " +
         (config.joint_vocab ? "joint" : "source and target") + (config.byte_fallback ? ", byte fallback" : "") +
         (config.placeholder_share > 0 ? ", placeholder tokens" : "") +
         (config.train_temperature > 0 ? ", temperature " + format_significant(config.train_temperature) : "") +
         ", seed " + std::to_string(config.seed) + tags;
}

CorpusRecipe training_recipe(const TrainConfig& config) {
  CorpusRecipe recipe;
  for (const CorpusSpec& corpus : training_corpora(config)) {
    recipe.source_files.insert(recipe.source_files.end(), corpus.source_files.begin(), corpus.source_files.end());
    recipe.target_files.insert(recipe.target_files.end(), corpus.target_files.begin(), corpus.target_files.end());
    recipe.tags.insert(recipe.tags.end(), corpus.source_files.size(), corpus.source_tokens());
  }
  recipe.vocabulary_settings = vocabulary_settings(config);
  recipe.placeholder_share = config.placeholder_share;
  recipe.placeholder_seed = config.seed;
  return recipe;
}

std::string corpus_dir(const TrainConfig& config) {
  return config.corpus_dir.empty() ? config.model_dir : config.corpus_dir;
}

// The vocabularies in `directory` for `config`'s settings, or nothing when a file is missing.
std::optional<Vocabularies> read_vocabularies(const TrainConfig& config, const fs::path& directory) {
  const auto read = [](const fs::path& path) -> std::optional<Vocabulary> {
    if (!fs::exists(path)) return std::nullopt;
    try {
      return Vocabulary::from_serialized(read_file(path.string()), path.string());
    } catch (const std::runtime_error&) {
      return std::nullopt;  // not a vocabulary: trained anew
    }
  };
  Vocabularies vocabularies;
  if (config.joint_vocab) {
    auto joint = read(directory / "vocab.joint.model");
    if (!joint) return std::nullopt;
    vocabularies.source = *joint;
    vocabularies.target = *joint;
  } else {
    auto source = read(directory / "vocab.source.model"), target = read(directory / "vocab.target.model");
    if (!source || !target) return std::nullopt;
    vocabularies.source = *source;
    vocabularies.target = *target;
  }
  return vocabularies;
}

void write_vocabularies(const TrainConfig& config, const Vocabularies& vocabularies, const fs::path& directory) {
  if (config.joint_vocab) {
    write_file_atomic((directory / "vocab.joint.model").string(), vocabularies.source.serialized());
  } else {
    write_file_atomic((directory / "vocab.source.model").string(), vocabularies.source.serialized());
    write_file_atomic((directory / "vocab.target.model").string(), vocabularies.target.serialized());
  }
}

// At most `limit` pairs of the recipe, for training the vocabularies: all of them, in order, when
// there are no more; otherwise a uniform sample (reservoir sampling, seeded).
ParallelText vocabulary_sample(const CorpusRecipe& recipe, int64_t limit, int seed) {
  ParallelText sample;
  CorpusStats stats;
  std::mt19937_64 generator(static_cast<uint64_t>(seed));
  int64_t seen = 0;
  for_each_pair(recipe.source_files, recipe.target_files, stats, [&](std::string& source, std::string& target) {
    ++seen;
    if (static_cast<int64_t>(sample.source.size()) < limit) {
      sample.source.push_back(std::move(source));
      sample.target.push_back(std::move(target));
      return;
    }
    const auto slot = static_cast<int64_t>(generator() % static_cast<uint64_t>(seen));
    if (slot < limit) {
      sample.source[static_cast<size_t>(slot)] = std::move(source);
      sample.target[static_cast<size_t>(slot)] = std::move(target);
    }
  });
  return sample;
}

// With train-temperature: a sample in which each corpus has its share of an epoch (text/
// corpus_mix.h, temperature_weights over the pairs each corpus has), at most `limit` pairs in all:
// the corpora's pairs counted first, then as many of each as its share asks (vocabulary_sample,
// shuffled), repeated where the share is larger than the corpus.
ParallelText tempered_vocabulary_sample(const TrainConfig& config, int64_t limit) {
  const std::vector<CorpusSpec> corpora = training_corpora(config);
  std::vector<int64_t> sizes;
  for (const CorpusSpec& corpus : corpora) {
    CorpusStats stats;
    for_each_pair(corpus.source_files, corpus.target_files, stats, [](std::string&, std::string&) {});
    sizes.push_back(stats.lines - stats.empty);
  }
  const std::vector<double> weights = temperature_weights(sizes, config.train_temperature);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  const double scale = std::min(1.0, static_cast<double>(limit) / static_cast<double>(std::max<int64_t>(total, 1)));
  ParallelText sample;
  std::mt19937_64 generator(static_cast<uint64_t>(config.seed));
  for (size_t i = 0; i < corpora.size(); ++i) {
    const auto wanted = static_cast<int64_t>(std::llround(weights[i] * static_cast<double>(sizes[i]) * scale));
    if (wanted == 0 || sizes[i] == 0) continue;
    CorpusRecipe recipe;
    recipe.source_files = corpora[i].source_files;
    recipe.target_files = corpora[i].target_files;
    const ParallelText pairs = vocabulary_sample(recipe, std::min(wanted, sizes[i]), config.seed + static_cast<int>(i));
    const auto size = static_cast<int64_t>(pairs.source.size());
    if (size == 0) continue;
    std::vector<int64_t> order(static_cast<size_t>(size));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), generator);
    for (int64_t k = 0; k < wanted; ++k) {
      const auto pick = static_cast<size_t>(order[static_cast<size_t>(k % size)]);
      sample.source.push_back(pairs.source[pick]);
      sample.target.push_back(pairs.target[pick]);
    }
  }
  return sample;
}

// Validation's memory grows with the longest dev line (a 1 MB line needs gigabytes), so a line
// over dev-max-length subwords is an error naming it, before the first update.
void check_dev_lengths(const TrainConfig& config, const DevSetSpec& set, const Vocabulary& source,
                       const Vocabulary& target) {
  const auto limit = static_cast<size_t>(config.dev_max_length);
  for (const auto& [file, vocabulary] : {std::pair{set.source, &source}, std::pair{set.target, &target}}) {
    const std::vector<std::string> lines = read_lines(file);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].size() <= limit) continue;  // a subword covers at least one byte
      const size_t pieces = vocabulary->encode(lines[i]).size();
      if (pieces > limit) {
        throw std::runtime_error(file + ":" + std::to_string(i + 1) + ": " + std::to_string(pieces) +
                                 " subwords, more than dev-max-length " + std::to_string(limit) +
                                 ": shorten or remove the line (and its pair), or raise dev-max-length");
      }
    }
  }
}

}  // namespace

Vocabularies build_vocabularies(const TrainConfig& config, const ParallelText& text, const std::string& directory,
                                spdlog::logger& log) {
  VocabularyTrainingOptions options{config.vocab_type,           config.vocab_size,    config.seed,
                                    std::max(1, config.threads), config.byte_fallback, {}};
  options.tags = source_tags(config);
  options.placeholders = config.placeholder_share > 0 ? kPlaceholderTokens : 0;
  const fs::path dir(directory);
  Vocabularies vocabularies;
  if (config.joint_vocab) {
    log.info("training a joint {} vocabulary of up to {} pieces", to_string(config.vocab_type), config.vocab_size);
    const std::string proto = train_vocabulary({&text.source, &text.target}, options);
    vocabularies.source = Vocabulary::from_serialized(proto, (dir / "vocab.joint.model").string());
    vocabularies.target = vocabularies.source;
  } else {
    log.info("training source and target {} vocabularies of up to {} pieces", to_string(config.vocab_type),
             config.vocab_size);
    const std::string source_proto = train_vocabulary({&text.source}, options);
    options.tags.clear();  // tags are source tokens
    const std::string target_proto = train_vocabulary({&text.target}, options);
    vocabularies.source = Vocabulary::from_serialized(source_proto, (dir / "vocab.source.model").string());
    vocabularies.target = Vocabulary::from_serialized(target_proto, (dir / "vocab.target.model").string());
  }
  write_vocabularies(config, vocabularies, dir);
  log.info("vocabulary sizes: source {}, target {}", vocabularies.source.size(), vocabularies.target.size());
  return vocabularies;
}

std::string prepared_corpus_path(const TrainConfig& config) {
  return (fs::path(corpus_dir(config)) / "train.corpus").string();
}

PreparedCorpus open_training_corpus(const TrainConfig& config, const Vocabularies& vocabularies,
                                    bool trained_on_this_text, spdlog::logger& log) {
  CorpusRecipe recipe = training_recipe(config);
  if (!trained_on_this_text) recipe.vocabulary_settings.clear();  // never reused by a new run
  const std::string path = prepared_corpus_path(config);
  std::string why;
  if (auto prepared = open_prepared_corpus(path, recipe, vocabularies.source, vocabularies.target, why)) {
    return std::move(*prepared);
  }
  const int threads = torch::get_num_threads();
  log.info("preparing {} ({}): encoding {} file pair(s) on {} threads", path, why, recipe.source_files.size(), threads);
  const auto start = std::chrono::steady_clock::now();
  fs::create_directories(corpus_dir(config));
  prepare_corpus(path, recipe, vocabularies.source, vocabularies.target, threads);
  log.info("prepared {} in {:.1f} s ({:.1f} MB)", path,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
           static_cast<double>(fs::file_size(path)) / 1e6);
  if (auto prepared = open_prepared_corpus(path, recipe, vocabularies.source, vocabularies.target, why)) {
    return std::move(*prepared);
  }
  throw std::runtime_error(path + ": just prepared, yet " + why + " (was it changed meanwhile?)");
}

TrainingData prepare_training_data(const TrainConfig& config, spdlog::logger& log) {
  const CorpusRecipe recipe = training_recipe(config);
  const fs::path directory(corpus_dir(config));
  fs::create_directories(directory);
  // Reused when the prepared corpus there was made from this text with vocabularies trained on it
  // with these settings.
  if (const std::optional<Vocabularies> vocabularies = read_vocabularies(config, directory)) {
    std::string why;
    std::optional<PreparedCorpus> prepared =
        open_prepared_corpus(prepared_corpus_path(config), recipe, vocabularies->source, vocabularies->target, why);
    if (prepared && prepared->vocabulary_settings == recipe.vocabulary_settings) {
      log.info("using the vocabularies and the prepared corpus in {} ({})", directory.string(),
               recipe.vocabulary_settings);
      return {*vocabularies, std::move(*prepared)};
    }
  }
  const ParallelText sample = config.train_temperature > 0
                                  ? tempered_vocabulary_sample(config, kVocabularySamplePairs)
                                  : vocabulary_sample(recipe, kVocabularySamplePairs, config.seed);
  if (sample.source.empty()) {
    throw std::runtime_error(config.train_source + ": no training pairs left after skipping empty lines");
  }
  TrainingData data;
  data.vocabularies = build_vocabularies(config, sample, directory.string(), log);
  data.prepared = open_training_corpus(config, data.vocabularies, /*trained_on_this_text=*/true, log);
  return data;
}

namespace {

// init-from: the model to fine-tune, on `device`: the weights and vocabularies of the checkpoint
// (or of the model directory's best.ckpt), in a network built with config.model, whose keys that
// fix the shapes must be the checkpoint's (the dropout rates are the config's).
TranslationModel fine_tuning_start(const TrainConfig& config, const torch::Device& device, spdlog::logger& log) {
  const std::string path =
      fs::is_directory(config.init_from) ? resolve_checkpoint(config.init_from, "best") : config.init_from;
  if (!fs::is_regular_file(path)) {
    throw std::runtime_error("init-from: " + path +
                             ": no such checkpoint (give a .ckpt file, or a model directory with a best.ckpt)");
  }
  TranslationModel start = load_model(path, device);
  if (start.stored_compute_type == "int8") {
    throw std::invalid_argument("init-from: " + path +
                                " is an int8 export, whose weights are rounded; fine-tune from the run's checkpoint");
  }
  check_fine_tunable(config.model, start.options, path);
  const auto check_reserved = [&](const std::string& tag, const std::string& key) {
    if (!tag.empty() && start.source_vocabulary.tag_id(tag) < 0) {
      throw std::invalid_argument("init-from: " + key + " gives " + tag + ", which the vocabulary of " + path +
                                  " does not reserve; fine-tuning can use only the tags its model's first run "
                                  "reserved (train-tags or reserved-tags), so leave it out or train from scratch");
    }
  };
  for (const CorpusSpec& corpus : training_corpora(config)) {
    check_reserved(corpus.tag, "train-tags");
    if (!corpus.language.empty()) check_reserved(language_token(corpus.language), "train-languages");
  }
  for (const std::string& tag : split_commas(config.reserved_tags)) check_reserved(tag, "reserved-tags");
  if (config.joint_vocab && start.source_vocabulary.serialized() != start.target_vocabulary.serialized()) {
    throw std::invalid_argument("joint-vocab: is true but " + path +
                                " has separate source and target vocabularies; set joint-vocab = false");
  }
  Seq2Seq network(config.model, start.source_vocabulary.size(), start.target_vocabulary.size());
  network->to(device);
  {
    torch::NoGradGuard no_grad;
    const auto trained = start.network->named_parameters();
    for (auto& parameter : network->named_parameters()) parameter.value().copy_(trained[parameter.key()]);
    const auto trained_buffers = start.network->named_buffers();
    for (auto& buffer : network->named_buffers()) buffer.value().copy_(trained_buffers[buffer.key()]);
  }
  start.network = network;
  start.options = config.model;
  log.info("fine-tuning {}: its weights and vocabularies, a fresh optimizer and schedule from step 0", path);
  return start;
}

}  // namespace

void use_training_corpus(const TrainConfig& config, const PreparedCorpus& prepared, TrainingSetup& setup) {
  setup.train_corpus = prepared.corpus;
  setup.train_pairs = setup.train_corpus.within_length(config.max_length);
  setup.corpora.clear();
  size_t file = 0;
  int64_t begin = 0;  // the corpus's first pair
  auto kept = setup.train_pairs.begin();
  for (const CorpusSpec& spec : training_corpora(config)) {
    CorpusShare corpus{spec.source_files.front(), spec.weight, spec.tag, {}, spec.language};
    int64_t end = begin;
    for (size_t i = 0; i < spec.source_files.size(); ++i) end += prepared.file_pairs.at(file++);
    for (; kept != setup.train_pairs.end() && *kept < end; ++kept) corpus.pairs.push_back(*kept);
    setup.corpora.push_back(std::move(corpus));
    begin = end;
  }
  if (config.train_temperature > 0) {
    std::vector<int64_t> sizes;
    for (const CorpusShare& corpus : setup.corpora) sizes.push_back(static_cast<int64_t>(corpus.pairs.size()));
    const std::vector<double> weights = temperature_weights(sizes, config.train_temperature);
    for (size_t i = 0; i < setup.corpora.size(); ++i) setup.corpora[i].weight = weights[i];
  }
}

void check_precision(const TrainConfig& config, const torch::Device& device) {
  if (config.precision == "bf16") check_bf16_training(device);
}

void check_training_files(const TrainConfig& config) {
  std::vector<std::string> files = expand_file_list(config.train_source, "train-source");
  for (const std::string& file : expand_file_list(config.train_target, "train-target")) files.push_back(file);
  for (const DevSetSpec& set : dev_sets(config)) {
    files.push_back(set.source);
    files.push_back(set.target);
  }
  for (const std::string& file : files) {
    if (!std::ifstream(file)) {
      if (!std::filesystem::exists(file)) throw FileNotFound(file + ": file not found (check the path)");
      throw std::runtime_error(file + ": cannot open file (check the path)");
    }
  }
}

namespace {

// Dropout goes on with the draws of the run it resumes: the CPU's generator, and the GPU's where
// the model is on one.
void restore_random_states(const TrainingCheckpoint& state, const torch::Device& device, const std::string& last_path,
                           spdlog::logger& log) {
  if (state.random_state.defined()) {
    set_random_state(state.random_state);
  } else {
    log.warn(
        "{} holds no random-number state (an older checkpoint): dropout draws differ from an "
        "uninterrupted run's",
        last_path);
  }
  if (!has_own_generator(device)) return;
  if (state.cuda_random_state.defined()) {
    set_random_state(state.cuda_random_state, device);
  } else {
    log.warn(
        "{} holds no GPU random-number state (written on the CPU, or by an older nmt): dropout draws "
        "differ from an uninterrupted run's",
        last_path);
  }
}

void log_training_pairs(const TrainConfig& config, const PreparedCorpus& prepared, const TrainingSetup& setup,
                        spdlog::logger& log) {
  const auto kept = static_cast<int64_t>(setup.train_pairs.size());
  log.info("training pairs: {} read, {} kept, {} skipped as empty, {} skipped as longer than {} subwords",
           prepared.lines, kept, prepared.empty, setup.train_corpus.size() - kept, config.max_length);
  if (config.placeholder_share > 0) {
    log.info("placeholder tokens in {} training pairs (placeholder-share {})", prepared.masked,
             format_significant(config.placeholder_share));
  }
  if (setup.corpora.size() > 1) {
    for (const CorpusShare& corpus : setup.corpora) {
      log.info("corpus {}: {} pairs kept, weight {}{}{}", corpus.name, corpus.pairs.size(),
               format_significant(corpus.weight), corpus.language.empty() ? "" : ", into " + corpus.language,
               corpus.tag.empty() ? "" : ", tag " + corpus.tag);
    }
  }
}

// --resume with other choices of the best checkpoint or of early stopping: each named in the log;
// the metrics' records go on (TrainingProgress::metrics), the best one's read from its own.
void log_changed_stopping(const TrainConfig& config, TrainingCheckpoint& state, spdlog::logger& log) {
  const std::vector<std::string> keys = {"best-metric", "early-stopping-patience", "early-stopping-metrics",
                                         "early-stopping-on", "min-improvement"};
  const auto requested = config_entries(config), stored = config_entries(state.config);
  for (size_t i = 0; i < requested.size(); ++i) {
    if (std::find(keys.begin(), keys.end(), requested[i].first) == keys.end()) continue;
    if (requested[i].second == stored[i].second) continue;
    log.info("--resume: {} = {} replaces the run's {}", requested[i].first,
             requested[i].second.empty() ? "\"\"" : requested[i].second,
             stored[i].second.empty() ? "\"\"" : stored[i].second);
  }
  if (config.best_metric != state.config.best_metric) {
    const MetricRecord& best = state.progress.metrics[static_cast<size_t>(config.best_metric)];
    state.progress.has_best = best.has_best;
    state.progress.best_score = best.best;
    state.progress.validations_without_improvement = best.stalled;
  }
}

}  // namespace

TrainingSetup set_up_training(const TrainConfig& config, bool resume, spdlog::logger& log) {
  set_threads(config.threads);
  set_seed(config.seed);
  TrainingSetup setup;
  setup.device = parse_device(config.device);  // rank 0 is its machine's first: GPU N of cuda:N
  check_precision(config, setup.device);
  if (std::string warning = slow_blas_warning(); !warning.empty()) log.warn("{}", warning);
  log.info("LibTorch {} threads, device {}, CPU kernels {}", torch::get_num_threads(), config.device,
           kernels::to_string(kernels::kernel_level()));

  // The files first, then the dev set (it is small): a mistake is found before any time is spent.
  check_training_files(config);
  const std::vector<DevSetSpec> dev_specs = dev_sets(config);
  std::vector<CorpusStats> dev_stats(dev_specs.size());
  for (size_t i = 0; i < dev_specs.size(); ++i) {
    const DevSetSpec& spec = dev_specs[i];
    DevSet& set = setup.dev_sets.emplace_back();
    set.name = spec.name;
    set.language = spec.language;
    set.text = read_parallel(spec.source, spec.target, dev_stats[i]);
    if (set.text.source.empty()) throw std::runtime_error(spec.source + ": the development set is empty");
  }

  TrainingCheckpoint& state = setup.state;
  const std::string last_path = (fs::path(config.model_dir) / kLastCheckpoint).string();
  PreparedCorpus prepared;
  if (resume) {
    state = load_training_checkpoint(last_path, setup.device, kResumeNeedsLastCheckpoint);
    check_resumable(config, state.config, last_path);
    log.info("resuming from {} at step {} (epoch {}, batch {}, learning rate {:g})", last_path, state.progress.step,
             state.progress.epoch + 1, state.progress.batch_in_epoch, state.progress.learning_rate);
    // A learning-rate other than the run's own is applied from here on (its decays start again), so
    // that config.toml and the checkpoints, which carry the new one, state the rate in use.
    if (config.learning_rate != state.config.learning_rate) {
      log.info("learning-rate {:g} replaces the run's {:g} (at {:g} after its decays) from step {}",
               config.learning_rate, state.config.learning_rate, state.progress.learning_rate, state.progress.step);
      state.progress.learning_rate = config.learning_rate;
      state.progress.plateau_count = 0;
    }
    log_changed_stopping(config, state, log);
    prepared = open_training_corpus(config, {state.model.source_vocabulary, state.model.target_vocabulary},
                                    /*trained_on_this_text=*/false, log);
  } else if (!config.init_from.empty()) {
    state.model = fine_tuning_start(config, setup.device, log);
    const Vocabularies vocabularies{state.model.source_vocabulary, state.model.target_vocabulary};
    write_vocabularies(config, vocabularies, config.model_dir);
    prepared = open_training_corpus(config, vocabularies, /*trained_on_this_text=*/false, log);
    state.progress.learning_rate = config.learning_rate;
  } else {
    TrainingData data = prepare_training_data(config, log);
    if (fs::path(corpus_dir(config)) != fs::path(config.model_dir)) {
      write_vocabularies(config, data.vocabularies, config.model_dir);  // the model directory is complete
    }
    prepared = std::move(data.prepared);
    state.model.source_vocabulary = data.vocabularies.source;
    state.model.target_vocabulary = data.vocabularies.target;
    state.model.network = Seq2Seq(config.model, data.vocabularies.source.size(), data.vocabularies.target.size());
    state.model.network->to(setup.device);
    state.progress.learning_rate = config.learning_rate;
  }
  state.config = config;  // schedule, limits and paths may change on resume
  state.model.options = config.model;
  Seq2Seq& model = state.model.network;
  setup.optimizer = std::make_unique<FusedAdam>(model->parameters(), torch::optim::AdamOptions(config.learning_rate));
  if (resume) {
    restore_optimizer(state, last_path, *setup.optimizer);
    restore_random_states(state, setup.device, last_path, log);
  }

  use_training_corpus(config, prepared, setup);
  log_training_pairs(config, prepared, setup, log);
  if (setup.train_pairs.empty()) {
    throw std::runtime_error("no training pairs within max-length " + std::to_string(config.max_length));
  }
  // Dev pairs are all kept (a cap far above max-length) so that dev BLEU covers the whole set.
  const Vocabulary& source_vocabulary = state.model.source_vocabulary;
  const Vocabulary& target_vocabulary = state.model.target_vocabulary;
  for (size_t i = 0; i < dev_specs.size(); ++i) {
    DevSet& set = setup.dev_sets[i];
    check_dev_lengths(config, dev_specs[i], source_vocabulary, target_vocabulary);
    std::vector<Example> examples =
        encode_parallel(set.text, source_vocabulary, target_vocabulary, std::numeric_limits<int>::max(), dev_stats[i]);
    const int64_t tag = target_language_tag(set.language, Ensemble(model), source_vocabulary, "dev-languages");
    if (tag >= 0) {
      for (Example& example : examples) example.source.insert(example.source.begin(), tag);
    }
    set.corpus = corpus_in_memory(examples, 4);
    log.info("dev pairs{}: {} read, {} kept ({} empty skipped)",
             dev_specs.size() > 1 ? " of " + set.name + " (" + dev_specs[i].source + ")" : "", dev_stats[i].lines,
             dev_stats[i].kept, dev_stats[i].empty);
  }

  int64_t parameter_count = 0;
  for (const auto& parameter : model->parameters()) parameter_count += parameter.numel();
  log.info("model: {} attention, {} parameters", config.model.attention, parameter_count);
  return setup;
}

StepResult train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const Batch& batch,
                      const TrainConfig& config) {
  return train_step(model, optimizer, {batch}, batch.target_tokens, config);
}

namespace {

// The 2-norm of all gradients together, as torch::nn::utils::clip_grad_norm_ computes it, left on
// their device (clip_grad_norm_ reads it back at once).
torch::Tensor gradient_norm(const std::vector<torch::Tensor>& gradients) {
  if (gradients.empty()) return torch::zeros({});
  std::vector<torch::Tensor> norms;
  norms.reserve(gradients.size());
  for (const torch::Tensor& gradient : gradients) norms.push_back(gradient.norm());
  return torch::stack(norms).norm();
}

}  // namespace

StepResult train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      int64_t update_tokens, const TrainConfig& config, GradientReducer* reducer, double clock) {
  // Gradients set to none rather than filled with zeros: backward then writes them instead of
  // adding into zeros (one pass over every parameter fewer, each way).
  model->zero_grad(/*set_to_none=*/true);
  StepResult result;
  result.clock = clock;
  torch::Tensor loss_sum;  // on the model's device: reading it there would wait for the GPU
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& batch = batches[i];
    SequenceLoss loss;
    // bf16 on a CPU: the large products in bf16, forward and backward (model/linear/bf16_products.h).
    const Bf16ProductsScope bf16(config.precision == "bf16" && kernels::run_on(batch.source.device()));
    {
      // bf16 on a GPU: the forward pass under autocast, the backward (below) outside it, as torch.autocast.
      const AutocastScope autocast(batch.source.device(), config.precision == "bf16");
      DecoderOutput out = model(batch.source, batch.source_lengths, batch.target_input, config.teacher_forcing);
      loss = sequence_loss(*model->decoder, out, batch.target_output, config.label_smoothing);
    }
    const torch::Tensor batch_loss = loss.sum.detach().to(torch::kDouble);
    loss_sum = loss_sum.defined() ? loss_sum + batch_loss : batch_loss;
    if (reducer && i + 1 == batches.size()) reducer->begin(loss_sum.item<double>(), clock);
    (loss.sum / static_cast<double>(update_tokens)).backward();
  }
  if (reducer) {
    if (batches.empty()) reducer->begin(0, clock);  // an epoch's last update may leave a rank none
    std::tie(result.loss_sum, result.clock) = reducer->finish();
  }
  std::vector<torch::Tensor> gradients;
  for (const auto& parameter : model->parameters()) {
    if (parameter.grad().defined()) gradients.push_back(parameter.grad());
  }
  // The loss and the gradient norm in one read: on a GPU, the one wait of an update.
  torch::Tensor values = gradient_norm(gradients).to(torch::kDouble).unsqueeze(0);
  if (!reducer && loss_sum.defined()) values = torch::cat({values.to(loss_sum.device()), loss_sum.unsqueeze(0)});
  values = values.cpu();
  const double norm = values[0].item<double>();
  result.gradient_norm = norm;
  if (!reducer && loss_sum.defined()) result.loss_sum = values[1].item<double>();
  const double mean_loss = result.loss_sum / static_cast<double>(update_tokens);
  if (!std::isfinite(mean_loss) || mean_loss > kDivergedLoss) {
    model->zero_grad(/*set_to_none=*/true);
    result.skipped = "loss " + std::to_string(mean_loss) + " per token";
    return result;
  }
  if (!std::isfinite(norm)) {
    model->zero_grad(/*set_to_none=*/true);
    result.skipped = "gradient norm " + std::to_string(norm);
    return result;
  }
  // Clipping as clip_grad_norm_ does it, its coefficient in float32 (a tensor there).
  const float clip =
      config.clip_norm > 0 ? static_cast<float>(config.clip_norm) / (static_cast<float>(norm) + 1e-6f) : 1.0f;
  if (clip < 1) {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& gradient : gradients) gradient.mul_(clip);
  }
  optimizer.step();
  return result;
}

}  // namespace nmt
