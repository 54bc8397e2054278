// The single-process implementation of the training processes' roles, and the choice between it
// and c10d data parallel (data_parallel.h).
#include "train/training_processes.h"

#include <optional>

#include "train/data_parallel.h"
#include "train/master_setup.h"
#include "train/run_log.h"
#include "util/io.h"

namespace nmt {

namespace {

// One process: it sets the run up, validates, logs and writes; its gradients are its own.
class SingleProcess final : public TrainingProcesses {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  TrainingSetup set_up(const TrainConfig& config, const TrainRunOptions& run) override {
    return set_up_master(config, run, lock_, run_log_);
  }
  spdlog::logger& log() override { return run_log_->logger(); }
  RunLog* run_log() override { return run_log_ ? &*run_log_ : nullptr; }
  void begin_update(int64_t /*step*/, const TokenCorpus& /*corpus*/,
                    const std::vector<std::vector<int64_t>>& /*batches*/, int64_t /*first*/,
                    int64_t /*count*/) override {}
  StepResult update(TrainingSetup& setup, const std::vector<Batch>& batches, int64_t update_tokens,
                    const TrainConfig& config, const std::function<double()>& elapsed) override {
    StepResult step = train_step(setup.state.model.network, *setup.optimizer, batches, update_tokens, config);
    step.clock = elapsed();
    return step;
  }
  void end_update(int64_t /*step*/) override {}
  ValidationDecision decide(int64_t /*step*/, const std::function<ValidationDecision()>& validate) override {
    return validate();
  }
  void finish(int64_t /*updates*/, double /*seconds*/) override {}

 private:
  std::optional<DirectoryLock> lock_;
  std::optional<RunLog> run_log_;
};

}  // namespace

std::unique_ptr<TrainingProcesses> make_training_processes(DistributedOptions options, const TrainConfig& config) {
  resolve_distributed_options(options);
  if (options.enabled()) return std::make_unique<DataParallelProcesses>(options, config);
  return std::make_unique<SingleProcess>();
}

}  // namespace nmt
