#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inference/checkpoint_format.h"
#include "text/batching.h"
#include "text/corpus_mix.h"
#include "text/subword_sampling.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/master_setup.h"
#include "train/run_log.h"
#include "train/schedule.h"
#include "train/setup.h"
#include "train/shortlist_job.h"
#include "train/stop_rules.h"
#include "train/training_processes.h"
#include "train/validator.h"
#include "util/format.h"
#include "util/log.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// A validation's bookkeeping: every metric's record (stop_rules.h), the best metric's best score
// and patience, the learning-rate decay. Returns whether the best metric improved.
bool record_validation(TrainingProgress& progress, const ValidationResult& result, const TrainConfig& config,
                       const LearningRateSchedule& schedule) {
  for (const auto& [name, metric] : metric_names()) {
    record_metric(progress.metrics[static_cast<size_t>(metric)], result.metric(metric), metric, config.min_improvement);
  }
  const MetricRecord& best = progress.metrics[static_cast<size_t>(config.best_metric)];
  const bool improved = best.has_best && best.stalled == 0;
  progress.best_score = best.best;
  progress.has_best = best.has_best;
  progress.validations_without_improvement = best.stalled;
  progress.learning_rate = schedule.after_validation(improved, progress.plateau_count, progress.learning_rate);
  return improved;
}

// The first weight that is not finite, or "" when all are.
std::string non_finite_weight(const Seq2Seq& network) {
  for (const auto& parameter : network->named_parameters()) {
    if (!torch::isfinite(parameter.value()).all().item<bool>()) return parameter.key();
  }
  return "";
}

std::string describe_non_finite(double value) { return std::isnan(value) ? "not a number" : "infinite"; }

// Why a validation shows the weights broken, or "" when it does not: a weight, the dev loss or the
// best metric's value that is not finite, or a dev loss over kDivergedLoss a token. Finite weights
// of a sane size give a finite loss (the log-softmax is computed stably), so a dev loss that is not
// finite means weights that overflow; enormous finite weights give a finite but enormous loss or
// none, depending on the BLAS's handling of overflow.
std::string broken_weights(const TrainingCheckpoint& state, const ValidationResult& result) {
  if (std::string name = non_finite_weight(state.model.network); !name.empty()) {
    return "weight " + name + " is not finite";
  }
  if (!std::isfinite(result.loss)) return "the dev loss is " + describe_non_finite(result.loss);
  if (result.loss > kDivergedLoss) {
    return "the dev loss is " + fmt::format("{:.3g}", result.loss) + " nats a token (over " +
           fmt::format("{:g}", kDivergedLoss) + ")";
  }
  const Metric metric = state.config.best_metric;
  if (!std::isfinite(result.metric(metric))) {
    return "dev " + to_string(metric) + " is " + describe_non_finite(result.metric(metric));
  }
  return "";
}

// The checkpoints of `dir` that hold the last good weights (every one saved was checked), with
// their steps, for a divergence message.
std::string last_good_checkpoints(const fs::path& dir) {
  std::vector<std::string> found;
  for (const char* name : {kBestCheckpoint, kLastCheckpoint}) {
    const std::string path = (dir / name).string();
    if (!fs::exists(path)) continue;
    try {
      found.push_back(path + " (step " + std::to_string(read_checkpoint_step(path)) + ")");
    } catch (const std::exception&) {
      found.push_back(path + " (unreadable)");
    }
  }
  if (found.empty()) return "and no checkpoint was written before";
  if (found.size() == 1) return found[0] + " holds the last good weights";
  return found[0] + " and " + found[1] + " hold the last good weights";
}

// The one-line error of a run that diverged at `step` (`why`): nothing is saved.
std::string divergence_message(const std::string& model_dir, int64_t step, const std::string& why) {
  const fs::path dir(model_dir);
  const std::string remedy =
      fs::exists(dir / kLastCheckpoint)
          ? "--resume with a lower --learning-rate or with clip-norm set, or start again with --overwrite"
          : "lower learning-rate or set clip-norm, then --overwrite";
  return "training diverged at step " + std::to_string(step) + ": " + why + "; nothing saved, " +
         last_good_checkpoints(dir) + ": " + remedy + replaced_run_hint(model_dir);
}

std::string divergence_message(const TrainingCheckpoint& state, const std::string& why) {
  return divergence_message(state.config.model_dir, state.progress.step, why);
}

// After an update skipped as diverged (train_step): a warning, and after max-skipped-steps in a
// row the end of the run.
void check_divergence(int skipped_in_a_row, const std::string& why, int64_t step, const TrainConfig& config,
                      spdlog::logger& log) {
  log.warn("step {}: update skipped, {} ({} in a row; the run stops at max-skipped-steps {})", step, why,
           skipped_in_a_row, config.max_skipped_steps);
  if (skipped_in_a_row >= config.max_skipped_steps) {
    throw std::runtime_error(divergence_message(
        config.model_dir, step, std::to_string(skipped_in_a_row) + " updates in a row skipped (last: " + why + ")"));
  }
}

// Weights that are no longer finite are never saved: the run stops instead.
void require_finite_weights(const TrainingCheckpoint& state) {
  if (std::string name = non_finite_weight(state.model.network); !name.empty()) {
    throw std::runtime_error(divergence_message(state, "weight " + name + " is not finite"));
  }
}

// best.ckpt when improved, last.ckpt, and the kept step checkpoint (after last.ckpt, so that a kept
// step is never ahead of it). The weights were checked (broken_weights).
void save_checkpoints(const TrainingCheckpoint& state, FusedAdam& optimizer, bool improved, spdlog::logger& log) {
  const fs::path dir(state.config.model_dir);
  if (improved) save_checkpoint((dir / kBestCheckpoint).string(), state, nullptr);
  save_checkpoint((dir / kLastCheckpoint).string(), state, &optimizer);
  discard_replaced_run(state.config.model_dir, log);  // --overwrite's old run: this one has a model now
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
  const std::shared_ptr<spdlog::logger> log = make_console_logger("prepare");
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
  TrainingRun(const TrainConfig& config, TrainingProcesses& processes, TrainingSetup training_setup,
              std::function<bool()> interrupted)
      : config(config),
        processes(processes),
        interrupted(std::move(interrupted)),
        setup(std::move(training_setup)),
        schedule({config.warmup_steps, config.lr_decay_factor, config.lr_patience, config.min_learning_rate}),
        stop_rules(config),
        per_update(static_cast<int64_t>(processes.world_size()) * config.accumulate) {
    if (processes.is_master()) {
      validator.emplace(setup.state.model.network, setup.state.model.source_vocabulary,
                        setup.state.model.target_vocabulary, setup.dev_sets, config.best_pair, config.batch_tokens,
                        config.dev_max_decode_ratio, setup.device);
    }
    start = std::chrono::steady_clock::now();
  }

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }

  // The batch plan of `epoch`: the same on every rank, the corpora's pairs as their weights take
  // them (mix_epoch), cut by make_batches, both seeded by the run's seed and the epoch. With
  // subword-alpha the epoch trains on its pairs segmented anew, drawn while the epoch before
  // trained (text/subword_sampling.h), and the next epoch's draw starts here.
  void plan_epoch(int64_t epoch) {
    const EpochMix mix = mix_epoch(setup.corpora, epoch_seed(epoch));
    if (processes.is_master())
      processes.log().info("epoch {} trains on {}", epoch + 1, describe_mix(setup.corpora, mix));
    if (sampling.on()) {
      const auto asked = std::chrono::steady_clock::now();
      SampledCorpus sampled = (next_epoch == epoch ? std::move(next_corpus) : sample(epoch, mix.pairs)).get();
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
      corpus = std::move(sampled.corpus);
      if (processes.is_master()) {
        processes.log().info("epoch {}: segmentations drawn anew (subword-alpha {}) in {:.2f} s on their own thread{}",
                             epoch + 1, format_significant(sampling.alpha), sampled.seconds,
                             waited >= 0.01 ? fmt::format(", {:.2f} s waited for", waited) : "");
      }
      next_epoch = epoch + 1;
      if (next_epoch < config.max_epochs) {
        next_corpus = sample(next_epoch, mix_epoch(setup.corpora, epoch_seed(next_epoch)).pairs);
      }
    } else {
      corpus = setup.train_corpus;
    }
    batches = make_batches(corpus, mix.pairs, config.batch_tokens, /*shuffle=*/true, epoch_seed(epoch));
    batch_tokens = batch_target_tokens(corpus, batches);
  }

  uint64_t epoch_seed(int64_t epoch) const {
    return static_cast<uint64_t>(config.seed) * 1000003ULL + static_cast<uint64_t>(epoch);
  }

  std::future<SampledCorpus> sample(int64_t epoch, std::vector<int64_t> pairs) const {
    return sample_segmentations(setup.train_corpus, std::move(pairs), setup.state.model.source_vocabulary,
                                setup.state.model.target_vocabulary, sampling,
                                static_cast<unsigned int>(epoch_seed(epoch) & 0xffffffffU), stop_sampling);
  }

  // A run that stops before its next epoch does not wait for that epoch's draw.
  ~TrainingRun() { *stop_sampling = true; }
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  const TrainConfig& config;
  TrainingProcesses& processes;
  const std::function<bool()> interrupted;  // TrainRunOptions::interrupted
  TrainingSetup setup;
  std::optional<Validator> validator;  // rank 0's (or the only process's): it alone validates
  const LearningRateSchedule schedule;
  const StopRules stop_rules;
  std::chrono::steady_clock::time_point start;
  // One update takes `per_update` consecutive batches of the epoch's plan, `accumulate` per rank:
  // the plan is the same for any number of ranks, so a run resumes with another number.
  const int64_t per_update;
  const SubwordSampling sampling{config.subword_alpha, config.subword_nbest, config.max_length};
  const std::shared_ptr<std::atomic<bool>> stop_sampling = std::make_shared<std::atomic<bool>>(false);
  TokenCorpus corpus;                         // what the current epoch trains on: the prepared corpus, or its draw
  std::future<SampledCorpus> next_corpus;     // the next epoch's draw, under way
  int64_t next_epoch = -1;                    // the epoch next_corpus is for
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
    mine.push_back(collate(run.corpus, run.batches[first + i], config.model.reverse_target).to(setup.device));
  }
  run.processes.begin_update(progress.step, run.corpus, run.batches, first, count);
  const StepResult step = run.processes.update(setup, mine, update_tokens, config, [&run] { return run.elapsed(); });
  ++progress.step, progress.batch_in_epoch += count;
  if (step.skipped.empty()) {
    run.skipped_in_a_row = 0;
    if (RunLog* run_log = run.processes.run_log()) {
      run_log->update(progress, step.loss_sum, update_tokens, step.gradient_norm, learning_rate, step.clock);
    }
  } else {
    check_divergence(++run.skipped_in_a_row, step.skipped, progress.step, config, run.processes.log());
  }
  run.processes.end_update(progress.step);
  return step.clock;
}

// Rank 0's (or the only process's) validation: its bookkeeping, log lines and checkpoints. A
// validation that shows the weights broken is logged (never best), saves nothing, and decides a
// divergence: every later update would start from those weights.
ValidationDecision run_validation(TrainingRun& run) {
  TrainingCheckpoint& state = run.setup.state;
  TrainingProgress& progress = state.progress;
  const auto validation_start = std::chrono::steady_clock::now();
  const ValidationResult result = run.validator->run(run.processes.run_log()->writes_events() ? RunLog::kSamples : 0);
  const std::string broken = broken_weights(state, result);
  const double old_rate = progress.learning_rate;
  const bool improved = broken.empty() && record_validation(progress, result, run.config, run.schedule);
  run.processes.run_log()->validation(
      progress, result, improved, old_rate,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - validation_start).count(), run.elapsed());
  if (!broken.empty()) return {progress.learning_rate, "", divergence_message(state, broken)};
  save_checkpoints(state, *run.setup.optimizer, improved, run.processes.log());
  return {progress.learning_rate, run.stop_rules.after_validation(progress), ""};
}

// A due validation: rank 0 validates, and its learning-rate decay, early stop and divergence hold
// on every process. Returns why the run stops, or "" to go on; throws on a divergence.
std::string validate_and_decide(TrainingRun& run) {
  TrainingProgress& progress = run.setup.state.progress;
  const ValidationDecision decision = run.processes.decide(progress.step, [&run] { return run_validation(run); });
  if (!decision.divergence.empty()) throw std::runtime_error(decision.divergence);
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
    if (run.interrupted && run.interrupted()) return "interrupted";
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
  discard_replaced_run(run.config.model_dir, run.processes.log());
}

// min-improvement is one threshold in each metric's own units: BLEU and chrF points beside nats of
// loss (or perplexity) make one of them stall, or never.
void warn_of_mixed_units(const TrainConfig& config, spdlog::logger& log) {
  if (config.min_improvement <= 0) return;
  std::vector<Metric> watched = early_stopping_metrics(config);
  watched.push_back(config.best_metric);
  const bool points = std::any_of(watched.begin(), watched.end(), higher_is_better);
  const bool nats = !std::all_of(watched.begin(), watched.end(), higher_is_better);
  if (points && nats) {
    log.warn(
        "min-improvement {:g} applies to each metric in its own units: BLEU and chrF points, and the loss "
        "or perplexity as they are; watch metrics of one kind, or set it for the one that matters",
        config.min_improvement);
  }
}

// The run itself, once its processes are made.
TrainSummary train_with(const TrainConfig& config, const TrainRunOptions& options,
                        const std::unique_ptr<TrainingProcesses>& processes) {
  if (options.interrupted && processes->world_size() > 1) {
    throw std::invalid_argument("a run that can be interrupted between updates has one process, not " +
                                std::to_string(processes->world_size()) + " (start several with nmt train)");
  }
  TrainingRun run(config, *processes, processes->set_up(config, options), options.interrupted);
  TrainingProgress& progress = run.setup.state.progress;
  spdlog::logger& log = processes->log();
  // The batch plan of the epoch the run starts in; its size stands for every epoch's in the plan.
  run.plan_epoch(progress.epoch);
  const auto batches_per_epoch = static_cast<int64_t>(run.batches.size());
  const int64_t planned_steps = run.stop_rules.planned_steps((batches_per_epoch + run.per_update - 1) / run.per_update);
  log.info("{} batches per epoch, {} per update; at most {} steps", batches_per_epoch, run.per_update, planned_steps);
  warn_of_mixed_units(config, log);

  TrainSummary summary;
  const int64_t first_step = progress.step;
  run.setup.state.model.network->train();
  if (RunLog* run_log = processes->run_log()) {
    run_log->start({config.log_every, progress.step, planned_steps, batches_per_epoch, config.validate_every,
                    config.max_minutes, &run.stop_rules});
  }
  for (const int64_t first_epoch = progress.epoch; progress.epoch < config.max_epochs;
       ++progress.epoch, progress.batch_in_epoch = 0) {
    if (progress.epoch != first_epoch) run.plan_epoch(progress.epoch);
    if (summary.stop_reason = run_epoch(run); !summary.stop_reason.empty()) break;
  }
  if (summary.stop_reason.empty()) summary.stop_reason = "max-epochs reached";
  if (RunLog* run_log = processes->run_log()) run_log->end(run.elapsed());
  summary.steps = progress.step;
  summary.best_score = progress.best_score;
  save_last_checkpoint(run);
  if (config.shortlist && processes->is_master()) write_shortlist(run.setup, log);
  summary.seconds = run.elapsed();
  processes->finish(progress.step - first_step, summary.seconds);
  log.info("done: {} after {} steps in {}; best dev {} {:.4f} ({})", summary.stop_reason, summary.steps,
           format_duration(summary.seconds), to_string(config.best_metric), summary.best_score,
           (fs::path(config.model_dir) / kBestCheckpoint).string());
  return summary;
}

}  // namespace

TrainSummary train(const TrainConfig& given, const TrainRunOptions& options) {
  const TrainConfig config = with_languages(given);
  validate(config);
  const std::unique_ptr<TrainingProcesses> processes = make_training_processes(options.distributed, config);
  try {
    return train_with(config, options, processes);
  } catch (const std::exception& error) {
    // A divergence, a full disk, a lost rank: train.log says how the run ended, not only the console.
    if (RunLog* run_log = processes->run_log()) run_log->fatal(error);
    throw;
  }
}

}  // namespace nmt
