// The c10d data parallel implementation of the training processes' roles (training_processes.h):
// one rank of a distributed run (distributed.h). Rank 0 sets the run up as a single process would
// and hands the others its state (replicas.h); every rank makes its share of each update, the
// gradients all-reduced while backward runs (gradient_reducer.h); rank 0 alone validates, logs and
// writes checkpoints, and tells the others what the validation decided through the store.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <optional>

#include "model/options.h"
#include "model/seq2seq.h"
#include "train/distributed.h"
#include "train/gradient_reducer.h"
#include "train/run_log.h"
#include "train/training_processes.h"
#include "util/io.h"

namespace nmt {

// A validation decision as rank 0 publishes it in the store ("decision/STEP"), read by the other
// ranks: throws std::runtime_error unless it is JSON with every field, a finite learning rate that
// is not negative and messages of at most 4 KiB. Anyone who reaches the store's port can write it.
ValidationDecision parse_decision(const std::string& text);

class DataParallelProcesses final : public TrainingProcesses {
 public:
  // `options` resolved and enabled (resolve_distributed_options); the rendezvous happens here.
  DataParallelProcesses(const DistributedOptions& options, const TrainConfig& config);

  int rank() const override { return distributed_.rank(); }
  int world_size() const override { return distributed_.world_size(); }
  TrainingSetup set_up(const TrainConfig& config, const TrainRunOptions& run) override;
  spdlog::logger& log() override { return run_log_ ? run_log_->logger() : *worker_log_; }
  RunLog* run_log() override { return run_log_ ? &*run_log_ : nullptr; }
  void begin_update(int64_t step, const TokenCorpus& corpus, const std::vector<std::vector<int64_t>>& batches,
                    int64_t first, int64_t count) override;
  StepResult update(TrainingSetup& setup, const std::vector<Batch>& batches, int64_t update_tokens,
                    const TrainConfig& config, const std::function<double()>& elapsed) override;
  void end_update(int64_t step) override;
  ValidationDecision decide(int64_t step, const std::function<ValidationDecision()>& validate) override;
  void finish(int64_t updates, double seconds) override;

 private:
  DistributedOptions options_;
  Distributed distributed_;
  ModelOptions model_options_;
  Seq2Seq model_{nullptr};                      // set_up's model, shared with the loop
  std::optional<DirectoryLock> lock_;           // rank 0's
  std::optional<RunLog> run_log_;               // rank 0's
  std::shared_ptr<spdlog::logger> worker_log_;  // the other ranks'
  std::optional<GradientReducer> reducer_;
};

}  // namespace nmt
