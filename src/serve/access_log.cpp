#include "serve/access_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "util/io.h"

namespace nmt::serve {

namespace {

// "2026-12-04T21:31:40.123Z"
std::string utc_time(double unix_seconds) {
  const auto whole = static_cast<std::time_t>(std::floor(unix_seconds));
  const int milliseconds = std::min(999, static_cast<int>((unix_seconds - static_cast<double>(whole)) * 1000));
  std::tm parts{};
  gmtime_r(&whole, &parts);
  char text[40];
  const size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &parts);
  return std::string(text, length) + fmt::format(".{:03d}Z", milliseconds);
}

}  // namespace

std::string access_log_line(const HttpExchange& exchange, double unix_seconds) {
  nlohmann::ordered_json line = {{"time", utc_time(unix_seconds)},
                                 {"method", printable(exchange.method, 16)},
                                 {"path", printable(exchange.path, 256)},
                                 {"status", exchange.status},
                                 {"request_bytes", exchange.request_bytes},
                                 {"answer_bytes", exchange.answer_bytes},
                                 {"seconds", std::round(exchange.seconds * 1e6) / 1e6},
                                 {"answered", exchange.answered},
                                 {"client", exchange.client},
                                 {"forwarded_for", printable(exchange.forwarded_for, 256)}};
  if (!exchange.log_fields.empty()) {
    const nlohmann::ordered_json more = nlohmann::ordered_json::parse(exchange.log_fields, nullptr, false);
    if (more.is_object()) line.update(more);
  }
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

AccessLog::AccessLog(const std::string& path, bool private_texts) : path_(path) {
  if (path == "-") {
    fd_ = STDOUT_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, private_texts ? 0600 : 0640);
    if (fd_ < 0) {
      throw std::runtime_error("--access-log " + path + ": cannot open it for appending (" + std::strerror(errno) +
                               "): give a file in a directory you can write, or - for standard output");
    }
    owned_ = true;
  }
  writer_ = std::thread([this] { drain(); });
}

AccessLog::~AccessLog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  writer_.join();
  if (owned_) ::close(fd_);
}

void AccessLog::write(const HttpExchange& exchange) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string line = access_log_line(exchange, now);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lines_.size() >= kQueuedLines) {
      ++dropped_;
      return;
    }
    lines_.push_back(std::move(line));
  }
  queued_.notify_one();
}

size_t AccessLog::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void AccessLog::drain() {
  bool warned = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    queued_.wait(lock, [this] { return stopping_ || !lines_.empty(); });
    if (lines_.empty()) return;  // stopping, and every line written
    const std::string line = std::move(lines_.front());
    lines_.pop_front();
    lock.unlock();
    const std::string failed = write_fully(fd_, line.data(), line.size());
    lock.lock();
    if (!failed.empty()) {
      ++dropped_;
      if (!warned) {
        warned = true;
        spdlog::warn("--access-log {}: cannot write ({}); lines are lost until it can", path_, failed);
      }
    }
  }
}

}  // namespace nmt::serve
