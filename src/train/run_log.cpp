#include "train/run_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "train/checkpoint.h"
#include "train/validator.h"
#include "util/format.h"
#include "util/log.h"

namespace nmt {

namespace fs = std::filesystem;

RunLog::RunLog(const std::string& model_dir) : metrics_path_((fs::path(model_dir) / "metrics.jsonl").string()) {
  spdlog::sink_ptr console = console_sink();
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>((fs::path(model_dir) / "train.log").string());
  logger_ = std::make_shared<spdlog::logger>("train", spdlog::sinks_init_list{console, file});
  logger_->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  logger_->flush_on(spdlog::level::info);
  file_only_ = std::make_shared<spdlog::logger>("train.log", file);
  file_only_->set_pattern("[%Y-%m-%d %H:%M:%S] [%l] %v");
  file_only_->flush_on(spdlog::level::err);
  metrics_.open(metrics_path_, std::ios::app);
  if (!metrics_) throw std::runtime_error(metrics_path_ + ": cannot open the metrics file for writing");
}

void RunLog::fatal(const std::exception& error) {
  const std::string message = error.what();
  file_only_->error("{}", message.substr(0, message.find('\n')));
}

void RunLog::write_metrics(const std::string& line) {
  metrics_ << line << "\n";
  metrics_.flush();
  if (!metrics_) throw std::runtime_error(metrics_path_ + ": write failed (disk full?)");
}

void RunLog::start(int log_every, int64_t first_step, int64_t planned_steps) {
  log_every_ = log_every;
  first_step_ = first_step;
  planned_steps_ = planned_steps;
  window_start_ = std::chrono::steady_clock::now();
}

void RunLog::update(const TrainingProgress& progress, double loss_sum, int64_t target_tokens, double learning_rate,
                    double elapsed_seconds) {
  window_loss_ += loss_sum;
  window_tokens_ += target_tokens;
  if (progress.step % log_every_ != 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double window_seconds = std::chrono::duration<double>(now - window_start_).count();
  const double tokens_per_second = static_cast<double>(window_tokens_) / window_seconds;
  const double seconds_per_step = elapsed_seconds / static_cast<double>(progress.step - first_step_);
  const double left = seconds_per_step * static_cast<double>(std::max<int64_t>(0, planned_steps_ - progress.step));
  const double mean_loss = window_loss_ / static_cast<double>(window_tokens_);
  logger_->info("epoch {} step {} loss {:.4f} lr {:.2e} {:.0f} target tok/s elapsed {} left <= {}", progress.epoch + 1,
                progress.step, mean_loss, learning_rate, tokens_per_second, format_duration(elapsed_seconds),
                format_duration(left));
  nlohmann::ordered_json line = {{"event", "train"},
                                 {"step", progress.step},
                                 {"epoch", progress.epoch + 1},
                                 {"loss", mean_loss},
                                 {"learning_rate", learning_rate},
                                 {"target_tokens_per_second", tokens_per_second},
                                 {"elapsed_seconds", elapsed_seconds}};
  write_metrics(line.dump());
  window_loss_ = 0, window_tokens_ = 0;
  window_start_ = std::chrono::steady_clock::now();
}

void RunLog::validation(const TrainingProgress& progress, const ValidationResult& result, bool improved,
                        double old_learning_rate, double seconds, double elapsed_seconds) {
  logger_->info("validation at step {}: loss {:.4f} perplexity {:.2f} BLEU {:.2f}{} ({:.1f} s)", progress.step,
                result.loss, result.perplexity, result.bleu, improved ? " (new best)" : "", seconds);
  if (progress.learning_rate < old_learning_rate) {
    logger_->info("learning rate decayed to {:.2e}", progress.learning_rate);
  }
  nlohmann::ordered_json line = {{"event", "validation"},
                                 {"step", progress.step},
                                 {"epoch", progress.epoch + 1},
                                 {"dev_loss", result.loss},
                                 {"dev_perplexity", result.perplexity},
                                 {"dev_bleu", result.bleu},
                                 {"learning_rate", progress.learning_rate},
                                 {"best", improved ? 1 : 0},
                                 {"elapsed_seconds", elapsed_seconds}};
  write_metrics(line.dump());
  window_start_ = std::chrono::steady_clock::now();
}

}  // namespace nmt
