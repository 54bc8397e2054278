// When a run stops: the step, epoch and wall-clock limits, and early stopping after `patience`
// validations without improvement of the first, all or any of the metrics it watches (as Marian's
// --early-stopping-on). Each rule gives the reason it stops for, or "" to go on.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "train/checkpoint.h"

namespace nmt {

// A validation's `value` of `metric` into its record: an improvement beats the best so far by more
// than `min_improvement` (a value that is not finite never does).
inline void record_metric(MetricRecord& record, double value, Metric metric, double min_improvement) {
  const double gain = higher_is_better(metric) ? value - record.best : record.best - value;
  if (std::isfinite(value) && (!record.has_best || gain > min_improvement)) {
    record = {true, value, 0};
  } else {
    ++record.stalled;
  }
}

class StopRules {
 public:
  explicit StopRules(const TrainConfig& config)
      : max_steps_(config.max_steps),
        max_epochs_(config.max_epochs),
        max_minutes_(config.max_minutes),
        patience_(config.early_stopping_patience),
        watched_(early_stopping_metrics(config)),
        on_(config.early_stopping_on) {}

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

  // After a validation: early stopping, when the first watched metric (early-stopping-on first),
  // all of them or any has not improved for `patience` validations.
  std::string after_validation(const TrainingProgress& progress) const {
    if (patience_ <= 0) return "";
    std::vector<std::string> stalled;
    for (const Metric metric : watched_) {
      if (progress.metrics[static_cast<size_t>(metric)].stalled >= patience_) stalled.push_back(to_string(metric));
    }
    const bool first = progress.metrics[static_cast<size_t>(watched_.front())].stalled >= patience_;
    const bool stop = on_ == "all" ? stalled.size() == watched_.size() : on_ == "any" ? !stalled.empty() : first;
    if (!stop) return "";
    std::string names = on_ == "first" ? to_string(watched_.front()) : "";
    for (size_t i = 0; on_ != "first" && i < stalled.size(); ++i) names += (i == 0 ? "" : ", ") + stalled[i];
    return "early stopping: " + std::to_string(patience_) + " validations without improvement of " + names +
           (watched_.size() > 1 ? " (early-stopping-on " + on_ + ")" : "");
  }

  // The fewest validations after which early stopping can stop the run (1: the next may), or 0
  // when it is off: for the progress line's estimate.
  int64_t validations_left(const TrainingProgress& progress) const {
    if (patience_ <= 0) return 0;
    int64_t least = patience_, most = 0;
    for (const Metric metric : watched_) {
      const int64_t stalled = progress.metrics[static_cast<size_t>(metric)].stalled;
      least = std::min(least, stalled);
      most = std::max(most, stalled);
    }
    const int64_t first = progress.metrics[static_cast<size_t>(watched_.front())].stalled;
    const int64_t stalled = on_ == "all" ? least : on_ == "any" ? most : first;
    return std::max<int64_t>(1, patience_ - stalled);
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
  std::vector<Metric> watched_;
  std::string on_;
};

}  // namespace nmt
