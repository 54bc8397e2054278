// Rank 0's (or the only process's) part of setting a training run up: the model directory checked
// against the request (a new run, --resume or --overwrite), locked and cleared of what a new run
// replaces; train.log and metrics.jsonl opened (run_log.h); the run set up (setup.h); its
// configuration written to config.toml. The other ranks of a distributed run write nothing
// (replicas.h).
#pragma once

#include <optional>

#include "config/train_config.h"
#include "train/run_log.h"
#include "train/setup.h"
#include "util/io.h"

namespace nmt {

struct TrainRunOptions;

// Removes model_dir/previous-run, once the new run has written last.ckpt (rank 0).
void discard_replaced_run(const std::string& model_dir, spdlog::logger& log);

// The model directory checked and locked, the run set up, its configuration written. The lock and
// the log live as long as `lock` and `run_log`.
TrainingSetup set_up_master(const TrainConfig& config, const TrainRunOptions& run, std::optional<DirectoryLock>& lock,
                            std::optional<RunLog>& run_log);

}  // namespace nmt
