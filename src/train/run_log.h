// What a training run reports: train.log (and the console) for people, metrics.jsonl (one JSON
// object per line, appended and flushed at once) for scripts such as scripts/plot_training.py.
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <fstream>
#include <memory>
#include <string>

namespace nmt {

struct TrainingProgress;
struct ValidationResult;

class RunLog {
 public:
  // Appends to model_dir/train.log and model_dir/metrics.jsonl.
  explicit RunLog(const std::string& model_dir);

  spdlog::logger& logger() { return *logger_; }

  // Before the first update: log every `log_every` steps; the time-left estimate counts from
  // `first_step` towards `planned_steps`. Starts the speed window.
  void start(int log_every, int64_t first_step, int64_t planned_steps);

  // Counts one update's loss; every `log_every` steps logs the window's mean loss and speed.
  void update(const TrainingProgress& progress, double loss_sum, int64_t target_tokens, double learning_rate,
              double elapsed_seconds);

  // The error that ends the run, into train.log only (the console gets it from the caller): its
  // first line, a LibTorch backtrace left out.
  void fatal(const std::exception& error);

  // Logs a validation; the speed window restarts after it (validation time is not throughput).
  void validation(const TrainingProgress& progress, const ValidationResult& result, bool improved,
                  double old_learning_rate, double seconds, double elapsed_seconds);

 private:
  void write_metrics(const std::string& line);

  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::logger> file_only_;  // train.log without the console
  std::ofstream metrics_;
  std::string metrics_path_;
  int log_every_ = 1;
  int64_t first_step_ = 0;
  int64_t planned_steps_ = 0;
  double window_loss_ = 0;
  int64_t window_tokens_ = 0;
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
};

}  // namespace nmt
