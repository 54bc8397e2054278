#include "train/run_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "train/checkpoint.h"
#include "train/stop_rules.h"
#include "train/validator.h"
#include "util/format.h"
#include "util/log.h"
#include "util/tensorboard.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {
constexpr size_t kHeatmapCell = 13;    // pixels a side of one attention weight and its grid line
constexpr size_t kHeatmapSide = 4096;  // at most, of an image
}  // namespace

RunLog::RunLog(const std::string& model_dir, const std::string& tensorboard)
    : tensorboard_(tensorboard), metrics_path_((fs::path(model_dir) / "metrics.jsonl").string()) {
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

RunLog::~RunLog() = default;

template <typename Write>
void RunLog::write_events(Write write) {
  if (!events_) return;
  const auto start = std::chrono::steady_clock::now();
  try {
    write(*events_);
  } catch (const std::exception& error) {
    logger_->warn("TensorBoard: {}; the run goes on without writing more events", error.what());
    events_written_ += events_->events();
    events_.reset();
  }
  events_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void RunLog::end(double elapsed_seconds) {
  set_status_line("");
  const size_t events = events_written_ + (events_ ? events_->events() : 0);
  if (events == 0 || elapsed_seconds <= 0) return;
  logger_->info("TensorBoard: {} events in {:.3f} s, writing them and translating their samples: {:.2f}% of {}", events,
                events_seconds_, 100.0 * events_seconds_ / elapsed_seconds, format_duration(elapsed_seconds));
}

void RunLog::draw_progress(const TrainingProgress& progress, double elapsed_seconds) {
  if (!status_line_enabled()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - drawn_ < std::chrono::milliseconds(250)) return;
  drawn_ = now;
  const double window_seconds = std::chrono::duration<double>(now - window_start_).count();
  const double seconds_per_step =
      elapsed_seconds / static_cast<double>(std::max<int64_t>(1, progress.step - plan_.first_step));
  std::string line = fmt::format("step {}/{}", progress.step, plan_.planned_steps);
  if (plan_.batches_per_epoch > 0) {
    line += fmt::format(
        " | epoch {} {:.0f}%", progress.epoch + 1,
        100.0 * static_cast<double>(progress.batch_in_epoch) / static_cast<double>(plan_.batches_per_epoch));
  }
  if (window_seconds > 0 && window_tokens_ > 0) {
    line += fmt::format(" | {:.0f} target tok/s | loss {:.3f}", static_cast<double>(window_tokens_) / window_seconds,
                        window_loss_ / static_cast<double>(window_tokens_));
  }
  // The run ends at the first of its limits; early stopping may come before, at the earliest after
  // validations_left validations.
  double left = seconds_per_step * static_cast<double>(std::max<int64_t>(0, plan_.planned_steps - progress.step));
  std::string limit = "max-steps";
  if (plan_.max_minutes > 0 && 60.0 * plan_.max_minutes - elapsed_seconds < left) {
    left = std::max(0.0, 60.0 * plan_.max_minutes - elapsed_seconds);
    limit = "max-minutes";
  }
  line += " | left <= " + format_duration(left) + " (" + limit + ")";
  const int64_t validations = plan_.stop_rules ? plan_.stop_rules->validations_left(progress) : 0;
  if (validations > 0 && plan_.validate_every > 0) {
    // Drawn before this step's validation: at a multiple of validate-every, the next is this one.
    const int64_t to_next = (plan_.validate_every - progress.step % plan_.validate_every) % plan_.validate_every;
    const int64_t steps = (validations - 1) * plan_.validate_every + to_next;
    const double early = seconds_per_step * static_cast<double>(steps);
    if (early < left) line += " | early stopping in >= " + format_duration(early);
  }
  set_status_line(line);
}

void RunLog::fatal(const std::exception& error) {
  set_status_line("");
  const std::string message = error.what();
  file_only_->error("{}", message.substr(0, message.find('\n')));
}

void RunLog::write_metrics(const std::string& line) {
  metrics_ << line << "\n";
  metrics_.flush();
  if (!metrics_) throw std::runtime_error(metrics_path_ + ": write failed (disk full?)");
}

void RunLog::start(const RunPlan& plan) {
  plan_ = plan;
  const int64_t first_step = plan.first_step;
  if (!tensorboard_.empty()) {
    // A resumed run (one that starts past step 0) logs again what the run it resumes logged after
    // its checkpoint. A new run's directory is its own: nothing in it is touched.
    if (first_step > 0) {
      try {
        if (const size_t dropped = drop_events_after(tensorboard_, first_step); dropped > 0) {
          logger_->info("TensorBoard: removed {} events after step {}, which this run writes again", dropped,
                        first_step);
        }
      } catch (const std::exception& error) {
        logger_->warn("TensorBoard: {}; its events after step {} stay, and may show twice", error.what(), first_step);
      }
    }
    try {
      events_ = std::make_unique<EventWriter>(tensorboard_);
      logger_->info("TensorBoard: events in {} (tensorboard --logdir {})", tensorboard_, tensorboard_);
    } catch (const std::exception& error) {
      logger_->warn("TensorBoard: {}; the run goes on without events", error.what());
    }
  }
  window_start_ = std::chrono::steady_clock::now();
}

void RunLog::update(const TrainingProgress& progress, double loss_sum, int64_t target_tokens, double gradient_norm,
                    double learning_rate, double elapsed_seconds) {
  window_loss_ += loss_sum;
  window_tokens_ += target_tokens;
  window_gradient_norm_ += gradient_norm;
  ++window_updates_;
  draw_progress(progress, elapsed_seconds);
  if (progress.step % plan_.log_every != 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double window_seconds = std::chrono::duration<double>(now - window_start_).count();
  const double tokens_per_second = static_cast<double>(window_tokens_) / window_seconds;
  const double seconds_per_step = elapsed_seconds / static_cast<double>(progress.step - plan_.first_step);
  const double left = seconds_per_step * static_cast<double>(std::max<int64_t>(0, plan_.planned_steps - progress.step));
  const double mean_loss = window_loss_ / static_cast<double>(window_tokens_);
  const double mean_gradient_norm = window_gradient_norm_ / static_cast<double>(window_updates_);
  logger_->info("epoch {} step {} loss {:.4f} lr {:.2e} {:.0f} target tok/s elapsed {} left <= {}", progress.epoch + 1,
                progress.step, mean_loss, learning_rate, tokens_per_second, format_duration(elapsed_seconds),
                format_duration(left));
  nlohmann::ordered_json line = {{"event", "train"},
                                 {"step", progress.step},
                                 {"epoch", progress.epoch + 1},
                                 {"loss", mean_loss},
                                 {"learning_rate", learning_rate},
                                 {"target_tokens_per_second", tokens_per_second},
                                 {"gradient_norm", mean_gradient_norm},
                                 {"elapsed_seconds", elapsed_seconds}};
  write_metrics(line.dump());
  write_events([&](EventWriter& events) {
    events.scalar("train/loss", progress.step, mean_loss);
    events.scalar("train/learning_rate", progress.step, learning_rate);
    events.scalar("train/target_tokens_per_second", progress.step, tokens_per_second);
    events.scalar("train/gradient_norm", progress.step, mean_gradient_norm);
  });
  window_loss_ = 0, window_tokens_ = 0, window_gradient_norm_ = 0, window_updates_ = 0;
  window_start_ = std::chrono::steady_clock::now();
}

void RunLog::validation(const TrainingProgress& progress, const ValidationResult& result, bool improved,
                        double old_learning_rate, double seconds, double elapsed_seconds) {
  logger_->info("validation at step {}: loss {:.4f} perplexity {:.2f} BLEU {:.2f} chrF {:.2f}{} ({:.1f} s)",
                progress.step, result.loss, result.perplexity, result.bleu, result.chrf, improved ? " (new best)" : "",
                seconds);
  if (result.sets.size() > 1) {  // each dev set's own numbers, after the line of the ones that count
    for (const DevScores& set : result.sets) {
      logger_->info("  {}: loss {:.4f} perplexity {:.2f} BLEU {:.2f} chrF {:.2f}", set.name, set.loss, set.perplexity,
                    set.bleu, set.chrf);
    }
  }
  if (progress.learning_rate < old_learning_rate) {
    logger_->info("learning rate decayed to {:.2e}", progress.learning_rate);
  }
  nlohmann::ordered_json line = {{"event", "validation"},
                                 {"step", progress.step},
                                 {"epoch", progress.epoch + 1},
                                 {"dev_loss", result.loss},
                                 {"dev_perplexity", result.perplexity},
                                 {"dev_bleu", result.bleu},
                                 {"dev_chrf", result.chrf},
                                 {"learning_rate", progress.learning_rate},
                                 {"best", improved ? 1 : 0},
                                 {"elapsed_seconds", elapsed_seconds}};
  if (result.sets.size() > 1) {
    nlohmann::ordered_json sets = nlohmann::ordered_json::object();
    for (const DevScores& set : result.sets) {
      sets[set.name] = {{"loss", set.loss}, {"perplexity", set.perplexity}, {"bleu", set.bleu}, {"chrf", set.chrf}};
    }
    line["dev_sets"] = sets;
  }
  write_metrics(line.dump());
  write_events([&](EventWriter& events) {
    events.scalar("dev/loss", progress.step, result.loss);
    events.scalar("dev/perplexity", progress.step, result.perplexity);
    events.scalar("dev/bleu", progress.step, result.bleu);
    events.scalar("dev/chrf", progress.step, result.chrf);
    if (result.sets.size() < 2) return;
    for (const DevScores& set : result.sets) {
      events.scalar("dev/" + set.name + "/loss", progress.step, set.loss);
      events.scalar("dev/" + set.name + "/bleu", progress.step, set.bleu);
      events.scalar("dev/" + set.name + "/chrf", progress.step, set.chrf);
    }
  });
  write_samples(progress.step, result);
  if (events_) events_seconds_ += result.samples_seconds;
  window_start_ = std::chrono::steady_clock::now();
}

// Each sample as text (source, reference, translation) and its attention as a heat map: rows are
// the output subwords and EOS, columns the source subwords and EOS.
void RunLog::write_samples(int64_t step, const ValidationResult& result) {
  write_events([&](EventWriter& events) {
    for (size_t i = 0; i < result.samples.size(); ++i) {
      const ValidationSample& sample = result.samples[i];
      const std::string name = "dev_sentence_" + std::to_string(i + 1);
      events.text("translation/" + name, step,
                  "**source:** " + sample.source + "  \n**reference:** " + sample.reference + "  \n**translation:** " +
                      sample.translation);
      if (sample.attention.empty()) continue;
      // Cells shrink so that a long sentence's image stays within kHeatmapSide pixels a side; past
      // kHeatmapSide / 2 subwords it has none.
      const size_t cells = std::max(sample.attention.size(), sample.attention.front().size());
      const size_t cell = std::min(kHeatmapCell, kHeatmapSide / cells) - 1;
      if (cell < 1) continue;
      int width = 0, height = 0;
      const std::vector<uint8_t> pixels = heatmap_pixels(sample.attention, static_cast<int>(cell), width, height);
      events.image("attention/" + name, step, encode_png(pixels, width, height, 3), width, height, 3);
    }
  });
}

}  // namespace nmt
