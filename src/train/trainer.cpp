#include "train/trainer.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "text/batching.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/run_log.h"
#include "train/schedule.h"
#include "train/setup.h"
#include "train/stop_rules.h"
#include "train/validator.h"
#include "util/format.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// Checks that model_dir fits the request (a new run, --resume or --overwrite) and clears what a new
// run replaces.
void prepare_model_dir(const TrainConfig& config, const TrainRunOptions& run) {
  const fs::path dir(config.model_dir);
  const bool has_run = fs::exists(dir / kLastCheckpoint);
  if (!run.resume && !run.overwrite) {
    // Any file a run writes (a run killed early may have best.ckpt but no last.ckpt; a user's folder
    // may have its own config.toml) is replaced only on request.
    std::vector<std::string> names = {kLastCheckpoint, kBestCheckpoint, "config.toml", "train.log", "metrics.jsonl"};
    for (const std::string& step : step_checkpoints(config.model_dir)) names.push_back(fs::path(step).filename());
    for (const std::string& name : names) {
      if (fs::exists(dir / name)) {
        throw std::invalid_argument("model-dir " + config.model_dir + " already holds " + name +
                                    ": pass --resume to continue its run, --overwrite to start again, or choose "
                                    "another --model-dir");
      }
    }
  }
  if (run.resume && !has_run) {
    throw std::invalid_argument("--resume: " + (dir / kLastCheckpoint).string() +
                                " does not exist; train without --resume first");
  }
  if (!run.resume) {
    for (const char* name : {"train.log", "metrics.jsonl", kBestCheckpoint, kLastCheckpoint, kAveragedCheckpoint}) {
      fs::remove(dir / name);
    }
    remove_step_checkpoints_after(config.model_dir, -1);  // a new run must not average with the old one
  }
}

// A validation's bookkeeping: best score, patience, learning-rate decay. Returns whether it improved.
bool record_validation(TrainingProgress& progress, double value, Metric metric, const LearningRateSchedule& schedule) {
  const bool improved =
      std::isfinite(value) &&
      (!progress.has_best || (higher_is_better(metric) ? value > progress.best_score : value < progress.best_score));
  if (improved) {
    progress.best_score = value;
    progress.has_best = true;
    progress.validations_without_improvement = 0;
  } else {
    ++progress.validations_without_improvement;
  }
  progress.learning_rate = schedule.after_validation(improved, progress.plateau_count, progress.learning_rate);
  return improved;
}

// After an update skipped as diverged (train_step): a warning, and after max-skipped-steps in a
// row the end of the run, with last.ckpt as the last validation wrote it.
void check_divergence(int skipped_in_a_row, const std::string& why, int64_t step, const TrainConfig& config,
                      spdlog::logger& log) {
  log.warn("step {}: update skipped, {} ({} in a row; the run stops at max-skipped-steps {})", step, why,
           skipped_in_a_row, config.max_skipped_steps);
  if (skipped_in_a_row >= config.max_skipped_steps) {
    throw std::runtime_error(
        "training diverged: " + std::to_string(skipped_in_a_row) + " updates in a row skipped (last: " + why +
        ", step " + std::to_string(step) + "); " + (fs::path(config.model_dir) / kLastCheckpoint).string() +
        " holds the last validated weights: lower learning-rate or set clip-norm, then --resume (or --overwrite)");
  }
}

// Weights that are no longer finite are never saved: the run stops instead.
void require_finite_weights(const TrainingCheckpoint& state) {
  for (const auto& parameter : state.model.network->named_parameters()) {
    if (!torch::isfinite(parameter.value()).all().item<bool>()) {
      throw std::runtime_error("training diverged: weight " + parameter.key() + " is not finite at step " +
                               std::to_string(state.progress.step) + "; nothing saved, " +
                               (fs::path(state.config.model_dir) / kLastCheckpoint).string() +
                               " holds the last good weights: lower learning-rate or set clip-norm, then --resume");
    }
  }
}

// best.ckpt when improved, last.ckpt, and the kept step checkpoint (after last.ckpt, so that a kept
// step is never ahead of it).
void save_checkpoints(const TrainingCheckpoint& state, FusedAdam& optimizer, bool improved, spdlog::logger& log) {
  const fs::path dir(state.config.model_dir);
  require_finite_weights(state);
  if (improved) save_checkpoint((dir / kBestCheckpoint).string(), state, nullptr);
  save_checkpoint((dir / kLastCheckpoint).string(), state, &optimizer);
  if (state.config.keep_checkpoints > 0) {
    save_checkpoint((dir / step_checkpoint_name(state.progress.step)).string(), state, nullptr);
    for (const auto& failure : prune_step_checkpoints(state.config.model_dir, state.config.keep_checkpoints)) {
      log.warn("could not delete an old step checkpoint: {}", failure);
    }
  }
}

}  // namespace

void prepare(const TrainConfig& config) {
  validate(config);
  set_threads(config.threads);
  auto log = spdlog::stderr_color_mt("prepare");
  log->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  const TrainingData data = prepare_training_data(config, *log);
  const TokenCorpus& corpus = data.prepared.corpus;
  log->info("{}: {} pairs read, {} encoded ({} skipped as empty), {} within max-length {}",
            prepared_corpus_path(config), data.prepared.lines, corpus.size(), data.prepared.empty,
            corpus.within_length(config.max_length).size(), config.max_length);
}

TrainSummary train(const TrainConfig& config, const TrainRunOptions& run) {
  validate(config);
  check_training_files(config);  // before anything in model-dir is removed
  fs::create_directories(config.model_dir);
  const DirectoryLock lock(config.model_dir);  // one run per model directory
  prepare_model_dir(config, run);
  RunLog run_log(config.model_dir);
  spdlog::logger& log = run_log.logger();
  std::set<fs::path> directories = {fs::path(config.model_dir), fs::path(prepared_corpus_path(config)).parent_path()};
  for (const fs::path& directory : directories) {
    for (const std::string& name : remove_stale_temporaries(directory.string())) {
      log.info("removed {}, left by a process that was killed while writing it", (directory / name).string());
    }
  }
  TrainingSetup setup = set_up_training(config, run.resume, log);
  if (run.resume) {
    // Kept checkpoints written after last.ckpt belong to the interrupted continuation, not this one.
    if (const int removed = remove_step_checkpoints_after(config.model_dir, setup.state.progress.step); removed > 0) {
      log.info("removed {} kept step checkpoint(s) newer than {}", removed,
               (fs::path(config.model_dir) / kLastCheckpoint).string());
    }
  }
  const std::string config_path = (fs::path(config.model_dir) / "config.toml").string();
  write_file_atomic(config_path, to_toml(config));
  log.info("effective configuration (also in {}):\n{}", config_path, to_toml(config));

  TrainingCheckpoint& state = setup.state;
  TrainingProgress& progress = state.progress;
  Seq2Seq& model = state.model.network;
  Validator validator(model, state.model.source_vocabulary, state.model.target_vocabulary, setup.dev_text,
                      setup.dev_corpus, config.batch_tokens, config.dev_max_decode_ratio, setup.device);
  const LearningRateSchedule schedule(
      {config.warmup_steps, config.lr_decay_factor, config.lr_patience, config.min_learning_rate});
  const StopRules stop_rules(config);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto epoch_batches = [&](int64_t epoch) {
    return make_batches(setup.train_corpus, setup.train_pairs, config.batch_tokens, /*shuffle=*/true,
                        static_cast<uint64_t>(config.seed) * 1000003ULL + static_cast<uint64_t>(epoch));
  };
  // The batch plan of the epoch the run starts in; its size stands for every epoch's in the plan.
  std::vector<std::vector<int64_t>> batches = epoch_batches(progress.epoch);
  const auto batches_per_epoch = static_cast<int64_t>(batches.size());
  const int64_t planned_steps = stop_rules.planned_steps(batches_per_epoch);
  log.info("{} batches per epoch; at most {} steps", batches_per_epoch, planned_steps);

  TrainSummary summary;
  int skipped_in_a_row = 0;  // updates skipped as diverged since the last one made
  model->train();
  run_log.start(config.log_every, progress.step, planned_steps);
  for (int64_t first_epoch = progress.epoch; progress.epoch < config.max_epochs && summary.stop_reason.empty();
       ++progress.epoch, progress.batch_in_epoch = 0) {
    if (progress.epoch != first_epoch) batches = epoch_batches(progress.epoch);
    const auto batch_count = static_cast<int64_t>(batches.size());
    while (progress.batch_in_epoch < batch_count) {
      if (summary.stop_reason = stop_rules.before_update(progress.step); !summary.stop_reason.empty()) break;
      const double learning_rate = schedule.rate(progress.step, progress.learning_rate);
      for (auto& group : setup.optimizer->param_groups()) {
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate);
      }
      Batch batch = collate(setup.train_corpus, batches[progress.batch_in_epoch]).to(setup.device);
      const StepResult step = train_step(model, *setup.optimizer, batch, config);
      ++progress.step, ++progress.batch_in_epoch;
      if (step.skipped.empty()) {
        skipped_in_a_row = 0;
        run_log.update(progress, step.loss_sum, batch.target_tokens, learning_rate, elapsed());
      } else {
        check_divergence(++skipped_in_a_row, step.skipped, progress.step, config, log);
      }

      const std::string limit = stop_rules.limit_reached(progress.step, elapsed());
      if (progress.step % config.validate_every == 0 || !limit.empty() ||
          stop_rules.last_update_of_training(progress.epoch, progress.batch_in_epoch, batch_count)) {
        const auto validation_start = std::chrono::steady_clock::now();
        const ValidationResult result = validator.run();
        const double old_rate = progress.learning_rate;
        const bool improved =
            record_validation(progress, result.metric(config.best_metric), config.best_metric, schedule);
        run_log.validation(progress, result, improved, old_rate,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - validation_start).count(),
                           elapsed());
        save_checkpoints(state, *setup.optimizer, improved, log);
        summary.stop_reason = stop_rules.after_validation(progress.validations_without_improvement);
      }
      if (summary.stop_reason.empty()) summary.stop_reason = limit;
      if (!summary.stop_reason.empty()) break;
    }
    if (!summary.stop_reason.empty()) break;
  }
  if (summary.stop_reason.empty()) summary.stop_reason = "max-epochs reached";
  require_finite_weights(state);
  save_checkpoint((fs::path(config.model_dir) / kLastCheckpoint).string(), state, setup.optimizer.get());
  summary.steps = progress.step;
  summary.best_score = progress.best_score;
  summary.seconds = elapsed();
  log.info("done: {} after {} steps in {}; best dev {} {:.4f} ({})", summary.stop_reason, summary.steps,
           format_duration(summary.seconds), to_string(config.best_metric), summary.best_score,
           (fs::path(config.model_dir) / kBestCheckpoint).string());
  return summary;
}

}  // namespace nmt
