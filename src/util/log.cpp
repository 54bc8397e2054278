#include "util/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "util/io.h"

namespace nmt {

namespace {

std::mutex factory_mutex;

std::function<spdlog::sink_ptr()>& factory() {
  static std::function<spdlog::sink_ptr()> make;
  return make;
}

// The status line: its text, drawn on standard error, under this mutex with every message that
// moves it.
std::mutex status_mutex;
std::string status_text;

bool stderr_is_terminal() {
  static const bool terminal = [] {
    const char* term = std::getenv("TERM");
    return ::isatty(STDERR_FILENO) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
  }();
  return terminal;
}

// A console that went away: nothing to do about it here.
void write_stderr(const std::string& text) { write_fully(STDERR_FILENO, text.data(), text.size()); }

// "\r", the line, and the rest of the terminal's row cleared.
std::string status_drawing(const std::string& text) {
  winsize size{};
  const size_t columns = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 ? size.ws_col - 1 : 79;
  return "\r" + text.substr(0, columns) + "\x1b[K";
}

// Standard error's sink, which clears the status line before a message and draws it again after.
class StatusAwareSink : public spdlog::sinks::sink {
 public:
  StatusAwareSink() : inner_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {}
  void log(const spdlog::details::log_msg& message) override {
    std::lock_guard<std::mutex> lock(status_mutex);
    if (!status_text.empty()) write_stderr("\r\x1b[K");
    inner_->log(message);
    inner_->flush();
    if (!status_text.empty()) write_stderr(status_drawing(status_text));
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> inner_;
};

}  // namespace

spdlog::sink_ptr console_sink() {
  std::lock_guard<std::mutex> lock(factory_mutex);
  if (factory()) return factory()();
  if (stderr_is_terminal()) return std::make_shared<StatusAwareSink>();
  return std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
}

bool status_line_enabled() {
  std::lock_guard<std::mutex> lock(factory_mutex);
  return !factory() && stderr_is_terminal();
}

void set_status_line(const std::string& text) {
  if (!status_line_enabled()) return;
  std::lock_guard<std::mutex> lock(status_mutex);
  if (text.empty()) {
    if (!status_text.empty()) write_stderr("\r\x1b[K");
  } else {
    write_stderr(status_drawing(text));
  }
  status_text = text;
}

void set_console_sinks(std::function<spdlog::sink_ptr()> make) {
  {
    std::lock_guard<std::mutex> lock(factory_mutex);
    factory() = std::move(make);
  }
  const spdlog::level::level_enum level = spdlog::default_logger()->level();
  auto log = std::make_shared<spdlog::logger>("", console_sink());
  log->set_level(level);
  spdlog::set_default_logger(std::move(log));
}

std::shared_ptr<spdlog::logger> make_console_logger(const std::string& name) {
  auto log = std::make_shared<spdlog::logger>(name, console_sink());
  spdlog::drop(name);              // the logger of an earlier run of the work in this process
  spdlog::initialize_logger(log);  // registered: the level SPDLOG_LEVEL gives its name
  log->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  return log;
}

}  // namespace nmt
