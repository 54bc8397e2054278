// Rank 0's (or the only process's) part of setting a training run up, in its model directory.
#include "train/master_setup.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/checkpoint_format.h"
#include "train/average.h"
#include "train/trainer.h"

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

}  // namespace

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

}  // namespace nmt
