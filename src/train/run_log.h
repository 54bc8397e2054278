// What a training run reports: train.log (and the console) for people, metrics.jsonl (one JSON
// object per line, appended and flushed at once) for scripts such as scripts/plot_training.py, and
// TensorBoard's event files (util/tensorboard.h): the same numbers as scalars, and at each
// validation the attention of the first dev sentences as images and their translations as text.
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <fstream>
#include <memory>
#include <string>

namespace nmt {

class EventWriter;
class StopRules;
struct TrainingProgress;
struct ValidationResult;

// What the log's estimates read of the run's plan (RunLog::start).
struct RunPlan {
  int log_every = 1;
  int64_t first_step = 0;         // where this run starts (a resumed run's step)
  int64_t planned_steps = 0;      // the most it can reach (max-steps, max-epochs)
  int64_t batches_per_epoch = 0;  // of the epoch it starts in, for the epoch's share done
  int validate_every = 0;
  double max_minutes = 0;                 // 0: no limit
  const StopRules* stop_rules = nullptr;  // early stopping; outlives the run's updates
};

class RunLog {
 public:
  // Appends to model_dir/train.log and model_dir/metrics.jsonl, and writes a new event file into
  // `tensorboard` ("" for none). An event directory that cannot be written is warned of, and the
  // run goes on without it.
  RunLog(const std::string& model_dir, const std::string& tensorboard);
  ~RunLog();

  // Dev sentences shown with their attention and translation at each validation (TensorBoard).
  static constexpr size_t kSamples = 4;

  spdlog::logger& logger() { return *logger_; }
  // Whether TensorBoard events are being written (validations then translate kSamples again).
  bool writes_events() const { return events_ != nullptr; }

  // Before the first update: log every `log_every` steps; the time-left estimate counts from
  // `first_step` towards `planned_steps`. Starts the speed window.
  void start(const RunPlan& plan);
  // After the last update: the progress line goes (the summary follows as a plain line), and the
  // log says what the TensorBoard events cost: their count, and the seconds spent writing them
  // and translating the samples, against the run's `elapsed_seconds`.
  void end(double elapsed_seconds);

  // Counts one update's loss; every `log_every` steps logs the window's mean loss and speed. On a
  // terminal a progress line under the log shows, at most four times a second, the step, the
  // epoch's share done, the speed and the time left to the first of max-steps and max-minutes,
  // and to early stopping where it could come first (util/log.h, set_status_line).
  void update(const TrainingProgress& progress, double loss_sum, int64_t target_tokens, double gradient_norm,
              double learning_rate, double elapsed_seconds);

  // The error that ends the run, into train.log only (the console gets it from the caller): its
  // first line, a LibTorch backtrace left out.
  void fatal(const std::exception& error);

  // Logs a validation; the speed window restarts after it (validation time is not throughput).
  void validation(const TrainingProgress& progress, const ValidationResult& result, bool improved,
                  double old_learning_rate, double seconds, double elapsed_seconds);

 private:
  void write_metrics(const std::string& line);
  // Writes with the event writer; the first failure is warned of and ends the events.
  template <typename Write>
  void write_events(Write write);
  void write_samples(int64_t step, const ValidationResult& result);
  void draw_progress(const TrainingProgress& progress, double elapsed_seconds);

  std::string tensorboard_;  // the event directory, or ""
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::logger> file_only_;  // train.log without the console
  std::ofstream metrics_;
  std::string metrics_path_;
  std::unique_ptr<EventWriter> events_;  // null: none
  size_t events_written_ = 0;            // by writers that failed and went, and by events_
  double events_seconds_ = 0;            // writing events and translating their samples
  RunPlan plan_;
  std::chrono::steady_clock::time_point drawn_{};  // the progress line, last
  double window_loss_ = 0;
  int64_t window_tokens_ = 0;
  double window_gradient_norm_ = 0;
  int64_t window_updates_ = 0;
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
};

}  // namespace nmt
