#include "train/trainer.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "eval/attention_export.h"
#include "eval/bleu.h"
#include "search/translator.h"
#include "text/batching.h"
#include "text/corpus.h"
#include "text/special_tokens.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "train/loss.h"
#include "train/schedule.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<spdlog::logger> make_logger(const std::string& log_path) {
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_path);
  auto logger = std::make_shared<spdlog::logger>("train", spdlog::sinks_init_list{console, file});
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  logger->flush_on(spdlog::level::info);
  return logger;
}

// One JSON object per line, appended and flushed at once.
class MetricsFile {
 public:
  explicit MetricsFile(const std::string& path) : out_(path, std::ios::app) {
    if (!out_) throw std::runtime_error(path + ": cannot open the metrics file for writing");
    out_.precision(10);
  }
  void write(const std::string& event, const std::vector<std::pair<std::string, double>>& values) {
    out_ << "{\"event\": " << json_quote(event);
    for (const auto& [key, value] : values) {
      out_ << ", " << json_quote(key) << ": ";
      if (std::isfinite(value)) {
        out_ << value;
      } else {
        out_ << "null";
      }
    }
    out_ << "}\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, seconds));
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%ld:%02ld:%02ld", static_cast<long>(total / 3600),
                static_cast<long>((total / 60) % 60), static_cast<long>(total % 60));
  return buffer;
}

// Keys a resumed run must keep: those that fix the vocabulary and the network's shapes, and
// those that fix how each epoch is cut into batches (resuming continues mid-epoch).
bool is_fixed_on_resume(const std::string& key) {
  static const std::vector<std::string> keys = {
      "train-source",   "train-target",        "vocab-type",     "vocab-size",     "joint-vocab",
      "max-length",     "embedding-size",      "encoder-hidden-size", "encoder-layers", "decoder-hidden-size",
      "decoder-layers", "attention",           "attention-size", "cosine-sharpness", "tie-embeddings",
      "batch-tokens",   "seed"};
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

void check_resumable(const TrainConfig& requested, const TrainConfig& stored, const std::string& checkpoint) {
  const auto wanted = config_entries(requested);
  const auto had = config_entries(stored);
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (is_fixed_on_resume(wanted[i].first) && wanted[i].second != had[i].second) {
      throw std::invalid_argument(wanted[i].first + ": is " + wanted[i].second + " but " + checkpoint + " was trained with " +
                                  had[i].second + "; resume with the same value or start a new model-dir");
    }
  }
}

struct ValidationResult {
  double loss = 0;        // mean token cross-entropy (no label smoothing)
  double perplexity = 0;
  double bleu = 0;
  double metric(Metric which) const {
    switch (which) {
      case Metric::kBleu: return bleu;
      case Metric::kLoss: return loss;
      case Metric::kPerplexity: return perplexity;
    }
    return bleu;
  }
};

}  // namespace

Vocabularies build_vocabularies(const TrainConfig& config, const ParallelText& text, spdlog::logger& log) {
  VocabularyTrainingOptions options{config.vocab_type, config.vocab_size, config.seed, std::max(1, config.threads)};
  const fs::path dir(config.model_dir);
  Vocabularies vocabularies;
  if (config.joint_vocab) {
    log.info("training a joint {} vocabulary of up to {} pieces", to_string(config.vocab_type), config.vocab_size);
    const std::string proto = train_vocabulary({&text.source, &text.target}, options);
    write_file_atomic((dir / "vocab.joint.model").string(), proto);
    vocabularies.source = Vocabulary::from_serialized(proto, (dir / "vocab.joint.model").string());
    vocabularies.target = vocabularies.source;
  } else {
    log.info("training source and target {} vocabularies of up to {} pieces", to_string(config.vocab_type),
             config.vocab_size);
    const std::string source_proto = train_vocabulary({&text.source}, options);
    const std::string target_proto = train_vocabulary({&text.target}, options);
    write_file_atomic((dir / "vocab.source.model").string(), source_proto);
    write_file_atomic((dir / "vocab.target.model").string(), target_proto);
    vocabularies.source = Vocabulary::from_serialized(source_proto, (dir / "vocab.source.model").string());
    vocabularies.target = Vocabulary::from_serialized(target_proto, (dir / "vocab.target.model").string());
  }
  log.info("vocabulary sizes: source {}, target {}", vocabularies.source.size(), vocabularies.target.size());
  return vocabularies;
}

double train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const Batch& batch, const TrainConfig& config,
                  int64_t step) {
  DecoderOutput out = model(batch.source, batch.source_lengths, batch.target_input, config.teacher_forcing);
  const SequenceLoss loss = sequence_loss(*model->decoder, out, batch.target_output, config.label_smoothing);
  // Gradients set to none rather than filled with zeros: backward then writes them instead of
  // adding into zeros (one pass over every parameter fewer, each way).
  model->zero_grad(/*set_to_none=*/true);
  (loss.sum / static_cast<double>(loss.tokens)).backward();
  // clip_grad_norm_ with an infinite threshold only measures the norm.
  const double gradient_norm = torch::nn::utils::clip_grad_norm_(
      model->parameters(), config.clip_norm > 0 ? config.clip_norm : std::numeric_limits<double>::infinity());
  if (!std::isfinite(gradient_norm)) {
    // Stop before the update: the weights and last.ckpt stay as they were.
    throw std::runtime_error("training diverged at step " + std::to_string(step + 1) +
                             " (non-finite gradient norm); lower learning-rate or set clip-norm, then --resume");
  }
  optimizer.step();
  return loss.sum.item<double>();
}

TrainSummary train(const TrainConfig& requested_config, const TrainRunOptions& run) {
  validate(requested_config);
  TrainConfig config = requested_config;
  set_threads(config.threads);
  set_seed(config.seed);
  const torch::Device device = parse_device(config.device);

  const fs::path dir(config.model_dir);
  const std::string last_path = (dir / kLastCheckpoint).string();
  const std::string best_path = (dir / kBestCheckpoint).string();
  const bool has_run = fs::exists(last_path);
  if (has_run && !run.resume && !run.overwrite) {
    throw std::invalid_argument("model-dir " + config.model_dir +
                                " already holds a training run (last.ckpt): pass --resume to continue it, "
                                "--overwrite to start again, or choose another --model-dir");
  }
  if (run.resume && !has_run) {
    throw std::invalid_argument("--resume: " + last_path + " does not exist; train without --resume first");
  }
  fs::create_directories(dir);
  if (!has_run || run.overwrite) {
    for (const char* name : {"train.log", "metrics.jsonl", kBestCheckpoint, kLastCheckpoint, kAveragedCheckpoint}) {
      fs::remove(dir / name);
    }
    remove_step_checkpoints_after(config.model_dir, -1);  // a new run must not average with the old one
  }
  auto log = make_logger((dir / "train.log").string());
  MetricsFile metrics((dir / "metrics.jsonl").string());
  if (std::string warning = slow_blas_warning(); !warning.empty()) log->warn("{}", warning);
  log->info("LibTorch {} threads, device {}", torch::get_num_threads(), config.device);

  // Data: checked before any time is spent on vocabularies or models.
  CorpusStats train_stats, dev_stats;
  ParallelText train_text = read_parallel(config.train_source, config.train_target, train_stats);
  ParallelText dev_text = read_parallel(config.dev_source, config.dev_target, dev_stats);
  if (train_text.source.empty()) throw std::runtime_error(config.train_source + ": no training pairs left after skipping empty lines");
  if (dev_text.source.empty()) throw std::runtime_error(config.dev_source + ": the development set is empty");

  ModelBundle bundle;
  std::unique_ptr<FusedAdam> optimizer;
  if (run.resume) {
    bundle = load_checkpoint(last_path, device);
    check_resumable(config, bundle.config, last_path);
    bundle.config = config;  // schedule, limits and paths may change on resume
    log->info("resuming from {} at step {} (epoch {}, batch {})", last_path, bundle.progress.step,
              bundle.progress.epoch + 1, bundle.progress.batch_in_epoch);
    // Kept checkpoints written after last.ckpt belong to the interrupted continuation, not this one.
    if (const int removed = remove_step_checkpoints_after(config.model_dir, bundle.progress.step); removed > 0) {
      log->info("removed {} kept step checkpoint(s) newer than {}", removed, last_path);
    }
  } else {
    Vocabularies vocabularies = build_vocabularies(config, train_text, *log);
    bundle.config = config;
    bundle.source_vocabulary = vocabularies.source;
    bundle.target_vocabulary = vocabularies.target;
    bundle.model = Seq2Seq(config.model, vocabularies.source.size(), vocabularies.target.size());
    bundle.model->to(device);
    bundle.progress.learning_rate = config.learning_rate;
  }
  Seq2Seq& model = bundle.model;
  TrainingProgress& progress = bundle.progress;
  optimizer = std::make_unique<FusedAdam>(model->parameters(), torch::optim::AdamOptions(config.learning_rate));
  if (run.resume) restore_optimizer(last_path, *optimizer, device);
  write_file_atomic((dir / "config.toml").string(), to_toml(config));
  log->info("effective configuration (also in {}):\n{}", (dir / "config.toml").string(), to_toml(config));

  std::vector<Example> train_examples = encode_parallel(train_text, bundle.source_vocabulary, bundle.target_vocabulary,
                                                        config.max_length, train_stats);
  log->info("training pairs: {} read, {} kept, {} skipped as empty, {} skipped as longer than {} subwords",
            train_stats.lines, train_stats.kept, train_stats.empty, train_stats.too_long, config.max_length);
  if (train_examples.empty()) throw std::runtime_error("no training pairs within max-length " + std::to_string(config.max_length));
  // Dev pairs are all kept (a cap far above max-length) so that dev BLEU covers the whole set.
  std::vector<Example> dev_examples = encode_parallel(dev_text, bundle.source_vocabulary, bundle.target_vocabulary,
                                                      std::numeric_limits<int>::max(), dev_stats);
  log->info("dev pairs: {} read, {} kept ({} empty skipped)", dev_stats.lines, dev_stats.kept, dev_stats.empty);

  int64_t parameter_count = 0;
  for (const auto& parameter : model->parameters()) parameter_count += parameter.numel();
  log->info("model: {} attention, {} parameters", to_string(config.model.attention), parameter_count);

  LearningRateSchedule schedule({config.warmup_steps, config.lr_decay_factor, config.lr_patience, config.min_learning_rate});
  const auto dev_batches = make_batches(dev_examples, config.batch_tokens, /*shuffle=*/false, 0);
  SearchOptions dev_search;
  dev_search.beam_size = 1;
  dev_search.max_length_ratio = config.dev_max_decode_ratio;
  Translator dev_translator(model, bundle.source_vocabulary, bundle.target_vocabulary, dev_search, {64, false}, device);

  auto validate_model = [&]() {
    ValidationResult result;
    {
      model->eval();
      torch::InferenceMode inference_mode;
      double loss_sum = 0;
      int64_t tokens = 0;
      for (const auto& indices : dev_batches) {
        Batch batch = collate(dev_examples, indices).to(device);
        DecoderOutput out = model(batch.source, batch.source_lengths, batch.target_input);
        const SequenceLoss loss = sequence_loss(*model->decoder, out, batch.target_output, /*epsilon=*/0.0);
        loss_sum += loss.sum.item<double>();
        tokens += loss.tokens;
      }
      result.loss = loss_sum / static_cast<double>(tokens);
      result.perplexity = std::exp(result.loss);
    }
    const auto hypotheses = best_texts(dev_translator.translate(dev_text.source));
    result.bleu = eval::corpus_bleu(hypotheses, {dev_text.target}).score;
    model->train();
    return result;
  };

  const auto start = Clock::now();
  const int64_t start_step = progress.step;
  auto elapsed = [&]() { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const auto batches_per_epoch =
      static_cast<int64_t>(make_batches(train_examples, config.batch_tokens, true, config.seed).size());
  const int64_t planned_steps = config.max_steps > 0 ? std::min<int64_t>(config.max_steps, batches_per_epoch * config.max_epochs)
                                                     : batches_per_epoch * config.max_epochs;
  log->info("{} batches per epoch; at most {} steps", batches_per_epoch, planned_steps);

  TrainSummary summary;
  double window_loss = 0;
  int64_t window_tokens = 0;
  auto window_start = Clock::now();
  bool stop = false;
  model->train();

  auto save_last = [&]() { save_checkpoint(last_path, bundle, optimizer.get()); };
  for (; progress.epoch < config.max_epochs && !stop; ++progress.epoch, progress.batch_in_epoch = 0) {
    const auto batches = make_batches(train_examples, config.batch_tokens, /*shuffle=*/true,
                                      static_cast<uint64_t>(config.seed) * 1000003ULL + static_cast<uint64_t>(progress.epoch));
    for (; progress.batch_in_epoch < static_cast<int64_t>(batches.size()) && !stop;) {
      if (config.max_steps > 0 && progress.step >= config.max_steps) {  // e.g. resumed at the limit
        summary.stop_reason = "max-steps reached";
        stop = true;
        break;
      }
      const double learning_rate = schedule.rate(progress.step, progress.learning_rate);
      for (auto& group : optimizer->param_groups()) {
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate);
      }
      Batch batch = collate(train_examples, batches[progress.batch_in_epoch]).to(device);
      const double loss_sum = train_step(model, *optimizer, batch, config, progress.step);
      ++progress.step;
      ++progress.batch_in_epoch;
      window_loss += loss_sum;
      window_tokens += batch.target_tokens;

      if (progress.step % config.log_every == 0) {
        const double window_seconds = std::chrono::duration<double>(Clock::now() - window_start).count();
        const double tokens_per_second = static_cast<double>(window_tokens) / window_seconds;
        const double seconds_per_step = elapsed() / static_cast<double>(progress.step - start_step);
        const double eta = seconds_per_step * static_cast<double>(std::max<int64_t>(0, planned_steps - progress.step));
        const double mean_loss = window_loss / static_cast<double>(window_tokens);
        log->info("epoch {} step {} loss {:.4f} lr {:.2e} {:.0f} target tok/s elapsed {} left <= {}", progress.epoch + 1,
                  progress.step, mean_loss, learning_rate, tokens_per_second, format_duration(elapsed()),
                  format_duration(eta));
        metrics.write("train", {{"step", static_cast<double>(progress.step)},
                                {"epoch", static_cast<double>(progress.epoch + 1)},
                                {"loss", mean_loss},
                                {"learning_rate", learning_rate},
                                {"target_tokens_per_second", tokens_per_second},
                                {"elapsed_seconds", elapsed()}});
        window_loss = 0, window_tokens = 0;
        window_start = Clock::now();
      }

      const bool out_of_steps = config.max_steps > 0 && progress.step >= config.max_steps;
      const bool out_of_time = config.max_minutes > 0 && elapsed() >= 60.0 * config.max_minutes;
      const bool end_of_training = out_of_steps || out_of_time || (progress.epoch + 1 == config.max_epochs &&
                                                    progress.batch_in_epoch == static_cast<int64_t>(batches.size()));
      if (progress.step % config.validate_every == 0 || end_of_training) {
        const auto validation_start = Clock::now();
        ValidationResult result = validate_model();
        const double value = result.metric(config.best_metric);
        const bool improved = std::isfinite(value) &&
                              (!progress.has_best || (higher_is_better(config.best_metric) ? value > progress.best_score
                                                                                            : value < progress.best_score));
        if (improved) {
          progress.best_score = value;
          progress.has_best = true;
          progress.validations_without_improvement = 0;
        } else {
          ++progress.validations_without_improvement;
        }
        const double old_rate = progress.learning_rate;
        progress.learning_rate = schedule.after_validation(improved, progress.plateau_count, progress.learning_rate);
        const double validation_seconds = std::chrono::duration<double>(Clock::now() - validation_start).count();
        log->info("validation at step {}: loss {:.4f} perplexity {:.2f} BLEU {:.2f}{} ({:.1f} s)", progress.step,
                  result.loss, result.perplexity, result.bleu, improved ? " (new best)" : "", validation_seconds);
        if (progress.learning_rate < old_rate) log->info("learning rate decayed to {:.2e}", progress.learning_rate);
        metrics.write("validation", {{"step", static_cast<double>(progress.step)},
                                     {"epoch", static_cast<double>(progress.epoch + 1)},
                                     {"dev_loss", result.loss},
                                     {"dev_perplexity", result.perplexity},
                                     {"dev_bleu", result.bleu},
                                     {"learning_rate", progress.learning_rate},
                                     {"best", improved ? 1.0 : 0.0},
                                     {"elapsed_seconds", elapsed()}});
        if (improved) save_checkpoint(best_path, bundle, nullptr);
        save_last();
        if (config.keep_checkpoints > 0) {  // after last.ckpt: a kept step is never ahead of it
          save_checkpoint((dir / step_checkpoint_name(progress.step)).string(), bundle, nullptr);
          for (const auto& failure : prune_step_checkpoints(config.model_dir, config.keep_checkpoints)) {
            log->warn("could not delete an old step checkpoint: {}", failure);
          }
        }
        window_start = Clock::now();  // validation time is not training throughput
        if (config.early_stopping_patience > 0 &&
            progress.validations_without_improvement >= config.early_stopping_patience) {
          summary.stop_reason = "early stopping: " + std::to_string(config.early_stopping_patience) +
                                " validations without improvement";
          stop = true;
        }
      }
      if ((out_of_steps || out_of_time) && !stop) {
        summary.stop_reason = out_of_steps ? "max-steps reached" : "max-minutes reached";
        stop = true;
      }
    }
    if (stop) break;
  }
  if (summary.stop_reason.empty()) summary.stop_reason = "max-epochs reached";
  save_last();
  summary.steps = progress.step;
  summary.best_score = progress.best_score;
  summary.seconds = elapsed();
  log->info("done: {} after {} steps in {}; best dev {} {:.4f} ({})", summary.stop_reason, summary.steps,
            format_duration(summary.seconds), to_string(config.best_metric), summary.best_score, best_path);
  return summary;
}

}  // namespace nmt
