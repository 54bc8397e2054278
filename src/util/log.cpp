#include "util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace nmt {

namespace {

std::mutex factory_mutex;

std::function<spdlog::sink_ptr()>& factory() {
  static std::function<spdlog::sink_ptr()> make;
  return make;
}

}  // namespace

spdlog::sink_ptr console_sink() {
  std::lock_guard<std::mutex> lock(factory_mutex);
  if (factory()) return factory()();
  return std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
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
