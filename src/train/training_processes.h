// The roles of the processes of a training run, behind one interface, so that the training loop
// (trainer.cpp) knows nothing of one process or several, as Marian's GraphGroup keeps its
// scheduler loop free of them. Two implementations: a single process (SingleProcess, in
// training_processes.cpp), and c10d data parallel (data_parallel.h), where rank 0 sets the run up,
// validates, logs and writes checkpoints, and the other ranks receive its state and decisions.
// The loop asks: set the run up, begin an update, make it (the gradients reduced over the
// processes), end it, decide after a validation, finish.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "train/distributed.h"
#include "train/setup.h"

namespace spdlog {
class logger;
}

namespace nmt {

class RunLog;
struct TrainRunOptions;

// What a validation decided, for every process: the learning rate after it (decayed or not), why
// the run stops ("" to go on), and whether it found the weights broken.
struct ValidationDecision {
  double learning_rate = 0;
  std::string stop_reason;
  std::string divergence;  // not "": the weights are broken, nothing was saved; every process ends with this error
};

class TrainingProcesses {
 public:
  virtual ~TrainingProcesses() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Whether this process validates, logs to train.log and writes checkpoints (rank 0, or the only one).
  bool is_master() const { return rank() == 0; }

  // The run set up: rank 0 (or the only process) checks and locks model_dir, sets the run up and
  // writes its configuration (master_setup.h); the other ranks receive rank 0's state
  // (replicas.h). On return the weights are the same on every process.
  virtual TrainingSetup set_up(const TrainConfig& config, const TrainRunOptions& run) = 0;
  // After set_up: the run's logger (train.log's on rank 0; the other ranks' warnings on stderr).
  virtual spdlog::logger& log() = 0;
  // After set_up: train.log and metrics.jsonl, which rank 0 (or the only process) alone writes;
  // null on the other ranks.
  virtual RunLog* run_log() = 0;

  // Before update `step`, which takes batches[first, first + count) of the epoch's plan (every
  // process's batches).
  virtual void begin_update(int64_t step, const TokenCorpus& corpus, const std::vector<std::vector<int64_t>>& batches,
                            int64_t first, int64_t count) = 0;
  // The update (train_step, setup.h): this process's `batches` forward and backward, the gradients
  // summed over every process's batches, the optimizer step. `elapsed`: the run's clock. The
  // result's clock is what the update's log line and time limit go by, the same on every process
  // (one process: after the update; c10d: rank 0's as the update began, summed with the gradients).
  virtual StepResult update(TrainingSetup& setup, const std::vector<Batch>& batches, int64_t update_tokens,
                            const TrainConfig& config, const std::function<double()>& elapsed) = 0;
  // After update `step` (counted from 1); c10d compares the replicas every --check-replicas updates.
  virtual void end_update(int64_t step) = 0;
  // A due validation after update `step`: rank 0 (or the only process) runs `validate`, and what it
  // decided holds on every process. After a divergence every process has the decision before
  // rank 0 returns, so that each can end the run with its error.
  virtual ValidationDecision decide(int64_t step, const std::function<ValidationDecision()>& validate) = 0;
  // Before train() returns, after `updates` updates in `seconds`.
  virtual void finish(int64_t updates, double seconds) = 0;
};

// A single process without RANK or WORLD_SIZE (resolve_distributed_options), else this process's
// rank of a c10d data parallel run (after the rendezvous).
std::unique_ptr<TrainingProcesses> make_training_processes(DistributedOptions options, const TrainConfig& config);

}  // namespace nmt
