// When a run stops: the step, epoch and wall-clock limits, and early stopping after `patience`
// validations without improvement. Each rule gives the reason it stops for, or "" to go on.
#pragma once

#include <cstdint>
#include <string>

#include "config/train_config.h"

namespace nmt {

struct TrainingProgress;

class StopRules {
 public:
  explicit StopRules(const TrainConfig& config)
      : max_steps_(config.max_steps),
        max_epochs_(config.max_epochs),
        max_minutes_(config.max_minutes),
        patience_(config.early_stopping_patience) {}

  // Before an update: the step limit is already reached (a run resumed at its limit).
  std::string before_update(int64_t step) const {
    return max_steps_ > 0 && step >= max_steps_ ? "max-steps reached" : "";
  }

  // After an update: the step or time limit is reached.
  std::string limit_reached(int64_t step, double elapsed_seconds) const {
    if (max_steps_ > 0 && step >= max_steps_) return "max-steps reached";
    if (max_minutes_ > 0 && elapsed_seconds >= 60.0 * max_minutes_) return "max-minutes reached";
    return "";
  }

  // True for the last update of the last epoch.
  bool last_update_of_training(int64_t epoch, int64_t batch_in_epoch, int64_t batches_in_epoch) const {
    return epoch + 1 == max_epochs_ && batch_in_epoch == batches_in_epoch;
  }

  // After a validation: early stopping.
  std::string after_validation(int64_t validations_without_improvement) const {
    if (patience_ > 0 && validations_without_improvement >= patience_) {
      return "early stopping: " + std::to_string(patience_) + " validations without improvement";
    }
    return "";
  }

  // The most updates the run can make, for the time-left estimate.
  int64_t planned_steps(int64_t batches_per_epoch) const {
    const int64_t by_epochs = batches_per_epoch * max_epochs_;
    return max_steps_ > 0 ? std::min<int64_t>(max_steps_, by_epochs) : by_epochs;
  }

 private:
  int64_t max_steps_;
  int64_t max_epochs_;
  double max_minutes_;
  int64_t patience_;
};

}  // namespace nmt
