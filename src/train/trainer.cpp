#include "train/trainer.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "text/batching.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/run_log.h"
#include "train/schedule.h"
#include "train/setup.h"
#include "train/stop_rules.h"
#include "train/training_processes.h"
#include "train/validator.h"
#include "util/format.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

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

namespace {

// The target tokens of each batch (as collate counts them: every target plus its end-of-sentence).
std::vector<int64_t> batch_target_tokens(const TokenCorpus& corpus, const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> tokens;
  tokens.reserve(batches.size());
  for (const auto& batch : batches) {
    int64_t sum = 0;
    for (int64_t pair : batch) sum += corpus.target_length(pair) + 1;
    tokens.push_back(sum);
  }
  return tokens;
}

// What the steps of one run share.
struct TrainingRun {
  TrainingRun(const TrainConfig& config, TrainingProcesses& processes, TrainingSetup training_setup)
      : config(config),
        processes(processes),
        setup(std::move(training_setup)),
        schedule({config.warmup_steps, config.lr_decay_factor, config.lr_patience, config.min_learning_rate}),
        stop_rules(config),
        per_update(static_cast<int64_t>(processes.world_size()) * config.accumulate) {
    if (processes.is_master()) {
      validator.emplace(setup.state.model.network, setup.state.model.source_vocabulary,
                        setup.state.model.target_vocabulary, setup.dev_text, setup.dev_corpus, config.batch_tokens,
                        config.dev_max_decode_ratio, setup.device);
    }
    start = std::chrono::steady_clock::now();
  }

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }

  // The batch plan of `epoch`: the same on every rank, make_batches with the run's seed.
  void plan_epoch(int64_t epoch) {
    batches = make_batches(setup.train_corpus, setup.train_pairs, config.batch_tokens, /*shuffle=*/true,
                           static_cast<uint64_t>(config.seed) * 1000003ULL + static_cast<uint64_t>(epoch));
    batch_tokens = batch_target_tokens(setup.train_corpus, batches);
  }

  const TrainConfig& config;
  TrainingProcesses& processes;
  TrainingSetup setup;
  std::optional<Validator> validator;  // rank 0's (or the only process's): it alone validates
  const LearningRateSchedule schedule;
  const StopRules stop_rules;
  std::chrono::steady_clock::time_point start;
  // One update takes `per_update` consecutive batches of the epoch's plan, `accumulate` per rank:
  // the plan is the same for any number of ranks, so a run resumes with another number.
  const int64_t per_update;
  std::vector<std::vector<int64_t>> batches;  // the current epoch's plan
  std::vector<int64_t> batch_tokens;          // the target tokens of each of its batches
  int skipped_in_a_row = 0;                   // updates skipped as diverged since the last one made
};

// One update from the current position in the epoch's plan: the step's learning rate, this
// process's share of the update's batches, the update and its bookkeeping. Returns the update's
// clock (TrainingProcesses::update), the same on every process.
double run_update(TrainingRun& run) {
  const TrainConfig& config = run.config;
  TrainingSetup& setup = run.setup;
  TrainingProgress& progress = setup.state.progress;
  const double learning_rate = run.schedule.rate(progress.step, progress.learning_rate);
  for (auto& group : setup.optimizer->param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate);
  }
  const int64_t first = progress.batch_in_epoch;
  const int64_t count = std::min(run.per_update, static_cast<int64_t>(run.batches.size()) - first);
  const int64_t update_tokens =
      std::accumulate(run.batch_tokens.begin() + first, run.batch_tokens.begin() + first + count, int64_t{0});
  const int rank = run.processes.rank();
  std::vector<Batch> mine;  // this rank's batches of the update
  for (int64_t i = rank * config.accumulate; i < std::min<int64_t>((rank + 1) * config.accumulate, count); ++i) {
    mine.push_back(collate(setup.train_corpus, run.batches[first + i]).to(setup.device));
  }
  run.processes.begin_update(progress.step, setup.train_corpus, run.batches, first, count);
  const StepResult step = run.processes.update(setup, mine, update_tokens, config, [&run] { return run.elapsed(); });
  ++progress.step, progress.batch_in_epoch += count;
  if (step.skipped.empty()) {
    run.skipped_in_a_row = 0;
    if (RunLog* run_log = run.processes.run_log()) {
      run_log->update(progress, step.loss_sum, update_tokens, learning_rate, step.clock);
    }
  } else {
    check_divergence(++run.skipped_in_a_row, step.skipped, progress.step, config, run.processes.log());
  }
  run.processes.end_update(progress.step);
  return step.clock;
}

// Rank 0's (or the only process's) validation: its bookkeeping, log lines and checkpoints.
ValidationDecision run_validation(TrainingRun& run) {
  TrainingCheckpoint& state = run.setup.state;
  TrainingProgress& progress = state.progress;
  const Metric metric = run.config.best_metric;
  const auto validation_start = std::chrono::steady_clock::now();
  const ValidationResult result = run.validator->run();
  const double old_rate = progress.learning_rate;
  const bool improved = record_validation(progress, result.metric(metric), metric, run.schedule);
  run.processes.run_log()->validation(
      progress, result, improved, old_rate,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - validation_start).count(), run.elapsed());
  save_checkpoints(state, *run.setup.optimizer, improved, run.processes.log());
  return {progress.learning_rate, run.stop_rules.after_validation(progress.validations_without_improvement)};
}

// A due validation: rank 0 validates, and its learning-rate decay and early stop hold on every
// process. Returns why the run stops, or "" to go on.
std::string validate_and_decide(TrainingRun& run) {
  TrainingProgress& progress = run.setup.state.progress;
  const ValidationDecision decision = run.processes.decide(progress.step, [&run] { return run_validation(run); });
  progress.learning_rate = decision.learning_rate;
  return decision.stop_reason;
}

// The rest of the current epoch's updates, each followed by a validation when one is due. Returns
// why the run stops, or "" at the end of the epoch.
std::string run_epoch(TrainingRun& run) {
  TrainingProgress& progress = run.setup.state.progress;
  const auto batch_count = static_cast<int64_t>(run.batches.size());
  while (progress.batch_in_epoch < batch_count) {
    if (std::string stop_reason = run.stop_rules.before_update(progress.step); !stop_reason.empty()) {
      return stop_reason;
    }
    const double clock = run_update(run);
    const std::string limit = run.stop_rules.limit_reached(progress.step, clock);
    std::string stop_reason;
    if (progress.step % run.config.validate_every == 0 || !limit.empty() ||
        run.stop_rules.last_update_of_training(progress.epoch, progress.batch_in_epoch, batch_count)) {
      stop_reason = validate_and_decide(run);
    }
    if (stop_reason.empty()) stop_reason = limit;
    if (!stop_reason.empty()) return stop_reason;
  }
  return "";
}

// Rank 0 (or the only process) writes last.ckpt as the run ends.
void save_last_checkpoint(TrainingRun& run) {
  if (!run.processes.is_master()) return;
  require_finite_weights(run.setup.state);
  save_checkpoint((fs::path(run.config.model_dir) / kLastCheckpoint).string(), run.setup.state,
                  run.setup.optimizer.get());
}

}  // namespace

TrainSummary train(const TrainConfig& config, const TrainRunOptions& options) {
  validate(config);
  const std::unique_ptr<TrainingProcesses> processes = make_training_processes(options.distributed, config);
  TrainingRun run(config, *processes, processes->set_up(config, options));
  TrainingProgress& progress = run.setup.state.progress;
  spdlog::logger& log = processes->log();
  // The batch plan of the epoch the run starts in; its size stands for every epoch's in the plan.
  run.plan_epoch(progress.epoch);
  const auto batches_per_epoch = static_cast<int64_t>(run.batches.size());
  const int64_t planned_steps = run.stop_rules.planned_steps((batches_per_epoch + run.per_update - 1) / run.per_update);
  log.info("{} batches per epoch, {} per update; at most {} steps", batches_per_epoch, run.per_update, planned_steps);

  TrainSummary summary;
  const int64_t first_step = progress.step;
  run.setup.state.model.network->train();
  if (RunLog* run_log = processes->run_log()) run_log->start(config.log_every, progress.step, planned_steps);
  for (const int64_t first_epoch = progress.epoch; progress.epoch < config.max_epochs;
       ++progress.epoch, progress.batch_in_epoch = 0) {
    if (progress.epoch != first_epoch) run.plan_epoch(progress.epoch);
    if (summary.stop_reason = run_epoch(run); !summary.stop_reason.empty()) break;
  }
  if (summary.stop_reason.empty()) summary.stop_reason = "max-epochs reached";
  summary.steps = progress.step;
  summary.best_score = progress.best_score;
  save_last_checkpoint(run);
  summary.seconds = run.elapsed();
  processes->finish(progress.step - first_step, summary.seconds);
  log.info("done: {} after {} steps in {}; best dev {} {:.4f} ({})", summary.stop_reason, summary.steps,
           format_duration(summary.seconds), to_string(config.best_metric), summary.best_score,
           (fs::path(config.model_dir) / kBestCheckpoint).string());
  return summary;
}

}  // namespace nmt
