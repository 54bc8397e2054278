#include "train/schedule.h"

#include <algorithm>

namespace nmt {

double LearningRateSchedule::rate(int64_t step, double base_rate) const {
  if (options_.warmup_steps > 0 && step < options_.warmup_steps) {
    return base_rate * static_cast<double>(step + 1) / options_.warmup_steps;
  }
  return base_rate;
}

double LearningRateSchedule::after_validation(bool improved, int64_t& plateau_count, double base_rate) const {
  if (improved) {
    plateau_count = 0;
    return base_rate;
  }
  if (++plateau_count <= options_.patience) return base_rate;
  plateau_count = 0;
  return std::max(options_.min_learning_rate, base_rate * options_.decay_factor);
}

}  // namespace nmt
