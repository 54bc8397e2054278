// Rank 0's (or the only process's) part of setting a training run up, in its model directory.
#include "train/master_setup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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

constexpr const char* kTensorboardDir = "tensorboard";  // the event files' default place, in model_dir

// The event directory of --tensorboard: "" for "no", model_dir/tensorboard when not given.
std::string tensorboard_directory(const TrainConfig& config) {
  if (config.tensorboard == "no") return "";
  if (config.tensorboard.empty()) return (fs::path(config.model_dir) / kTensorboardDir).string();
  return config.tensorboard;
}

// Checks that model_dir fits the request (a new run, --resume or --overwrite) and clears what a new
// run replaces.
void prepare_model_dir(const TrainConfig& config, const TrainRunOptions& run) {
  const fs::path dir(config.model_dir);
  const bool has_run = fs::exists(dir / kLastCheckpoint);
  if (!run.resume && !run.overwrite) {
    // Any file a run writes (a run killed early may have best.ckpt but no last.ckpt; a user's folder
    // may have its own config.toml) is replaced only on request.
    std::vector<std::string> names = {kLastCheckpoint, kBestCheckpoint, kAveragedCheckpoint, "config.toml",
                                      "train.log",     "metrics.jsonl", kTensorboardDir,     kReplacedRunDir};
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
}

// --overwrite: the old run's files move into model-dir/previous-run, where they stay until the new
// run has written its first last.ckpt (discard_replaced_run): a new run that diverges or is killed
// early leaves the old model, not nothing. The vocabularies are copied, not moved: the new run may
// read them (a corpus prepared in model-dir). Returns what was moved, for the log.
std::vector<std::string> move_run_aside(const TrainConfig& config) {
  const fs::path dir(config.model_dir);
  const fs::path aside = dir / kReplacedRunDir;
  std::vector<std::string> names = {kLastCheckpoint, kBestCheckpoint, kAveragedCheckpoint, "config.toml",
                                    "train.log",     "metrics.jsonl", "shortlist.bin",     kTensorboardDir};
  for (const std::string& step : step_checkpoints(config.model_dir)) names.push_back(fs::path(step).filename());
  const bool any_checkpoint = std::any_of(names.begin(), names.end(), [&](const std::string& name) {
    return fs::path(name).extension() == ".ckpt" && fs::exists(dir / name);
  });
  std::vector<std::string> moved;
  if (fs::exists(aside) && !any_checkpoint) {
    // An earlier --overwrite that saved nothing: previous-run still holds the last model; what it
    // left here (its log, its config) goes.
    for (const std::string& name : names) fs::remove_all(dir / name);
    return moved;
  }
  if (!any_checkpoint && !fs::exists(dir / "config.toml")) return moved;  // nothing of a run here
  fs::remove_all(aside);
  fs::create_directories(aside);
  for (const std::string& name : names) {
    if (fs::exists(dir / name)) {
      fs::rename(dir / name, aside / name);
      moved.push_back(name);
    }
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("vocab.", 0) == 0 && entry.path().extension() == ".model") {
      fs::copy_file(entry.path(), aside / name, fs::copy_options::overwrite_existing);
      moved.push_back(name + " (copied)");
    }
  }
  return moved;
}

}  // namespace

void discard_replaced_run(const std::string& model_dir, spdlog::logger& log) {
  const fs::path aside = fs::path(model_dir) / kReplacedRunDir;
  if (!fs::exists(aside)) return;
  fs::remove_all(aside);
  log.info("removed {}, the run this one replaced (--overwrite)", aside.string());
}

TrainingSetup set_up_master(const TrainConfig& config, const TrainRunOptions& run, std::optional<DirectoryLock>& lock,
                            std::optional<RunLog>& run_log) {
  check_training_files(config);  // before anything in model-dir is removed
  fs::create_directories(config.model_dir);
  lock.emplace(config.model_dir);  // one run per model directory
  prepare_model_dir(config, run);
  const std::vector<std::string> moved = run.overwrite ? move_run_aside(config) : std::vector<std::string>{};
  run_log.emplace(config.model_dir, tensorboard_directory(config));
  spdlog::logger& log = run_log->logger();
  if (!moved.empty()) {
    std::string list;
    for (const std::string& name : moved) list += (list.empty() ? "" : ", ") + name;
    log.info("--overwrite: the old run's files are in {} until this run writes its first checkpoint: {}",
             (fs::path(config.model_dir) / kReplacedRunDir).string(), list);
  }
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
