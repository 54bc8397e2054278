// Learning-rate schedule: optional linear warm-up, then reduce-on-plateau of the validation
// metric (as PyTorch's ReduceLROnPlateau, mode set by the metric's direction).
#pragma once

#include <cstdint>

namespace nmt {

struct ScheduleOptions {
  int warmup_steps = 0;
  double decay_factor = 0.5;
  int patience = 3;
  double min_learning_rate = 1e-5;
};

class LearningRateSchedule {
 public:
  explicit LearningRateSchedule(const ScheduleOptions& options) : options_(options) {}

  // The rate for update `step` (0-based) given the current plateau-decayed base rate.
  double rate(int64_t step, double base_rate) const;

  // After a validation: counts non-improving validations in `plateau_count` and returns the
  // (possibly decayed) base rate.
  double after_validation(bool improved, int64_t& plateau_count, double base_rate) const;

 private:
  ScheduleOptions options_;
};

}  // namespace nmt
