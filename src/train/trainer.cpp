#include "train/trainer.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>

#include "text/batching.h"
#include "text/special_tokens.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/distributed.h"
#include "train/replicas.h"
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

// The gradient all-reduce's bucket size (DistributedDataParallel's default is 25 MB): small enough
// that the first buckets go while backward still runs, large enough for few calls.
constexpr int64_t kBucketBytes = int64_t{4} << 20;

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

namespace {

// Rank 0 (or the only process): the model directory checked and locked, the run set up, its
// configuration written. The lock and the log live as long as `lock` and `run_log`.
TrainingSetup set_up_master(const TrainConfig& config, const TrainRunOptions& run, std::optional<DirectoryLock>& lock,
                            std::optional<RunLog>& run_log) {
  check_training_files(config);  // before anything in model-dir is removed
  fs::create_directories(config.model_dir);
  lock.emplace(config.model_dir);  // one run per model directory
  prepare_model_dir(config, run);
  run_log.emplace(config.model_dir);
  spdlog::logger& log = run_log->logger();
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
  return setup;
}

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

// The embeddings whose gradients are nonzero only in the rows a batch looks up: the source one, and
// the target one unless it is also the output layer.
std::vector<torch::Tensor> row_sparse_embeddings(Seq2Seq& model, const ModelOptions& options) {
  std::vector<torch::Tensor> embeddings = {model->encoder->embedding->weight};
  if (!options.tie_embeddings) embeddings.push_back(model->decoder->embedding->weight);
  return embeddings;
}

// The sorted ids that batches[first, first + count) look up in each of row_sparse_embeddings: the
// source ids with end-of-sentence and padding, and the target inputs with beginning-of-sentence.
std::vector<torch::Tensor> embedding_rows(const TokenCorpus& corpus, const std::vector<std::vector<int64_t>>& batches,
                                          int64_t first, int64_t count, const ModelOptions& options) {
  std::vector<torch::Tensor> rows;
  for (const bool source : {true, false}) {
    if (!source && options.tie_embeddings) break;
    std::set<int64_t> ids = {kPadId, kUnkId, kBosId, kEosId};
    for (int64_t b = first; b < first + count; ++b) {
      for (int64_t pair : batches[b]) {
        for (int64_t id : source ? corpus.source(pair) : corpus.target(pair)) ids.insert(id);
      }
    }
    rows.push_back(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong));
  }
  return rows;
}

}  // namespace

TrainSummary train(const TrainConfig& config, const TrainRunOptions& run) {
  validate(config);
  DistributedOptions distributed_options = run.distributed;
  resolve_distributed_options(distributed_options);
  std::unique_ptr<Distributed> distributed;
  if (distributed_options.enabled()) {
    distributed = std::make_unique<Distributed>(distributed_options, parse_device(config.device));
  }
  const bool master = !distributed || distributed->is_master();
  const int rank = distributed ? distributed->rank() : 0;
  const int world_size = distributed ? distributed->world_size() : 1;

  std::optional<DirectoryLock> lock;
  std::optional<RunLog> run_log;
  std::shared_ptr<spdlog::logger> worker_log;
  TrainingSetup setup;
  if (master) {
    setup = set_up_master(config, run, lock, run_log);
    if (distributed) publish_setup(*distributed, setup);
  } else {
    // The other ranks write nothing; their warnings and errors go to stderr.
    worker_log = std::make_shared<spdlog::logger>("rank " + std::to_string(rank),
                                                  std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    worker_log->set_pattern("[%Y-%m-%d %H:%M:%S] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
    worker_log->set_level(spdlog::level::warn);
    setup = receive_setup(config, *distributed, *worker_log);
  }
  spdlog::logger& log = master ? run_log->logger() : *worker_log;

  TrainingCheckpoint& state = setup.state;
  TrainingProgress& progress = state.progress;
  Seq2Seq& model = state.model.network;
  std::unique_ptr<GradientReducer> reducer;
  if (distributed) {
    synchronize_weights(*distributed, setup);
    reducer = std::make_unique<GradientReducer>(*distributed, model->parameters(), kBucketBytes,
                                                row_sparse_embeddings(model, config.model));
    log.info("distributed: {} ranks ({}, master {}:{}), {} batches of {} tokens per update, gradients in {} buckets",
             world_size, distributed->backend(), distributed_options.master_addr, distributed_options.master_port,
             world_size * config.accumulate, config.batch_tokens, reducer->bucket_count());
  }
  std::optional<Validator> validator;
  if (master) {
    validator.emplace(model, state.model.source_vocabulary, state.model.target_vocabulary, setup.dev_text,
                      setup.dev_corpus, config.batch_tokens, config.dev_max_decode_ratio, setup.device);
  }
  const LearningRateSchedule schedule(
      {config.warmup_steps, config.lr_decay_factor, config.lr_patience, config.min_learning_rate});
  const StopRules stop_rules(config);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto epoch_batches = [&](int64_t epoch) {
    return make_batches(setup.train_corpus, setup.train_pairs, config.batch_tokens, /*shuffle=*/true,
                        static_cast<uint64_t>(config.seed) * 1000003ULL + static_cast<uint64_t>(epoch));
  };
  // One update takes `per_update` consecutive batches of the epoch's plan, `accumulate` per rank:
  // the plan is the same for any number of ranks, so a run resumes with another number.
  const int64_t per_update = static_cast<int64_t>(world_size) * config.accumulate;
  // The batch plan of the epoch the run starts in; its size stands for every epoch's in the plan.
  std::vector<std::vector<int64_t>> batches = epoch_batches(progress.epoch);
  std::vector<int64_t> batch_tokens = batch_target_tokens(setup.train_corpus, batches);
  const auto batches_per_epoch = static_cast<int64_t>(batches.size());
  const int64_t planned_steps = stop_rules.planned_steps((batches_per_epoch + per_update - 1) / per_update);
  log.info("{} batches per epoch, {} per update; at most {} steps", batches_per_epoch, per_update, planned_steps);

  TrainSummary summary;
  const int64_t first_step = progress.step;
  int skipped_in_a_row = 0;  // updates skipped as diverged since the last one made
  model->train();
  if (master) run_log->start(config.log_every, progress.step, planned_steps);
  for (int64_t first_epoch = progress.epoch; progress.epoch < config.max_epochs && summary.stop_reason.empty();
       ++progress.epoch, progress.batch_in_epoch = 0) {
    if (progress.epoch != first_epoch) {
      batches = epoch_batches(progress.epoch);
      batch_tokens = batch_target_tokens(setup.train_corpus, batches);
    }
    const auto batch_count = static_cast<int64_t>(batches.size());
    while (progress.batch_in_epoch < batch_count) {
      if (summary.stop_reason = stop_rules.before_update(progress.step); !summary.stop_reason.empty()) break;
      const double learning_rate = schedule.rate(progress.step, progress.learning_rate);
      for (auto& group : setup.optimizer->param_groups()) {
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate);
      }
      const int64_t first = progress.batch_in_epoch;
      const int64_t count = std::min(per_update, batch_count - first);
      const int64_t update_tokens =
          std::accumulate(batch_tokens.begin() + first, batch_tokens.begin() + first + count, int64_t{0});
      std::vector<Batch> mine;  // this rank's batches of the update
      for (int64_t i = rank * config.accumulate; i < std::min<int64_t>((rank + 1) * config.accumulate, count); ++i) {
        mine.push_back(collate(setup.train_corpus, batches[first + i]).to(setup.device));
      }
      if (distributed) {
        distributed->announce_step(progress.step);
        reducer->set_rows(embedding_rows(setup.train_corpus, batches, first, count, config.model));
      }
      const StepResult step =
          train_step(model, *setup.optimizer, mine, update_tokens, config, reducer.get(), master ? elapsed() : 0.0);
      ++progress.step, progress.batch_in_epoch += count;
      const double clock = distributed ? step.clock : elapsed();  // rank 0's, on every rank
      if (step.skipped.empty()) {
        skipped_in_a_row = 0;
        if (master) run_log->update(progress, step.loss_sum, update_tokens, learning_rate, clock);
      } else {
        check_divergence(++skipped_in_a_row, step.skipped, progress.step, config, log);
      }
      if (distributed && distributed_options.check_replicas > 0 &&
          progress.step % distributed_options.check_replicas == 0) {
        distributed->check_same_on_every_rank(model->parameters(), progress.step);
      }

      const std::string limit = stop_rules.limit_reached(progress.step, clock);
      if (progress.step % config.validate_every == 0 || !limit.empty() ||
          stop_rules.last_update_of_training(progress.epoch, progress.batch_in_epoch, batch_count)) {
        if (distributed) distributed->check_same_on_every_rank(model->parameters(), progress.step);
        const std::string decision_key = "decision/" + std::to_string(progress.step);
        if (master) {
          const auto validation_start = std::chrono::steady_clock::now();
          const ValidationResult result = validator->run();
          const double old_rate = progress.learning_rate;
          const bool improved =
              record_validation(progress, result.metric(config.best_metric), config.best_metric, schedule);
          run_log->validation(
              progress, result, improved, old_rate,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - validation_start).count(), elapsed());
          save_checkpoints(state, *setup.optimizer, improved, log);
          summary.stop_reason = stop_rules.after_validation(progress.validations_without_improvement);
          if (distributed) {
            distributed->publish(
                decision_key,
                nlohmann::json{{"learning_rate", progress.learning_rate}, {"stop_reason", summary.stop_reason}}.dump());
          }
        } else {  // rank 0 validates meanwhile; its learning-rate decay and early stop hold for all
          const nlohmann::json decision = nlohmann::json::parse(distributed->wait_for(decision_key, 0));
          progress.learning_rate = decision.at("learning_rate").get<double>();
          summary.stop_reason = decision.at("stop_reason").get<std::string>();
        }
      }
      if (summary.stop_reason.empty()) summary.stop_reason = limit;
      if (!summary.stop_reason.empty()) break;
    }
    if (!summary.stop_reason.empty()) break;
  }
  if (summary.stop_reason.empty()) summary.stop_reason = "max-epochs reached";
  summary.steps = progress.step;
  summary.best_score = progress.best_score;
  if (master) {
    require_finite_weights(state);
    save_checkpoint((fs::path(config.model_dir) / kLastCheckpoint).string(), state, setup.optimizer.get());
  }
  summary.seconds = elapsed();
  if (distributed) {
    const double updates = static_cast<double>(std::max<int64_t>(1, progress.step - first_step));
    log.info(
        "distributed: {:.1f} MB all-reduced per update on average; {:.1f} s of {:.1f} waiting for all-reduces "
        "after backward ({:.1f} ms per update)",
        reducer->mean_bytes_per_update() / 1e6, reducer->wait_seconds(), summary.seconds,
        1000 * reducer->wait_seconds() / updates);
    distributed->finish();
  }
  log.info("done: {} after {} steps in {}; best dev {} {:.4f} ({})", summary.stop_reason, summary.steps,
           format_duration(summary.seconds), to_string(config.best_metric), summary.best_score,
           (fs::path(config.model_dir) / kBestCheckpoint).string());
  return summary;
}

}  // namespace nmt
