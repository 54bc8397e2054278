#include "text/line_stream.h"

#include <sys/stat.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "text/utf8.h"

namespace nmt {

struct LineStream::Shared {
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<std::string> lines;
  bool ended = false;
  std::string error;  // why reading stopped early, if it did
};

LineStream::LineStream(std::istream& in, std::string name) : shared_(std::make_shared<Shared>()) {
  // Detached: a reader blocked on a terminal must not keep the program from exiting.
  std::thread([shared = shared_, &in, name = std::move(name)] {
    std::string line;
    size_t number = 0;
    std::string error;
    while (std::getline(in, line)) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!is_valid_utf8(line)) {
        error = name + ":" + std::to_string(number) + ": invalid UTF-8; convert the text to UTF-8 (e.g. with iconv)";
        break;
      }
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->lines.push_back(std::move(line));
      shared->arrived.notify_one();
    }
    if (error.empty() && in.bad()) error = name + ": read error";
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->ended = true;
    shared->error = error;
    shared->arrived.notify_one();
  }).detach();
}

LineStream::~LineStream() = default;

std::vector<std::string> LineStream::take(size_t most) {
  std::unique_lock<std::mutex> lock(shared_->mutex);
  shared_->arrived.wait(lock, [this] { return shared_->ended || !shared_->lines.empty(); });
  std::vector<std::string> lines;
  while (!shared_->lines.empty() && lines.size() < most) {
    lines.push_back(std::move(shared_->lines.front()));
    shared_->lines.pop_front();
  }
  if (lines.empty() && !shared_->error.empty()) throw std::runtime_error(shared_->error);
  return lines;
}

bool is_stream(int fd) {
  struct stat status {};
  return ::fstat(fd, &status) == 0 && (S_ISFIFO(status.st_mode) || S_ISCHR(status.st_mode) || S_ISSOCK(status.st_mode));
}

}  // namespace nmt
