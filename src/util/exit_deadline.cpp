#include "util/exit_deadline.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

namespace nmt {
namespace {

using DeadlineClock = std::chrono::steady_clock;

struct ExitDeadline {
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<DeadlineClock::time_point> deadline;
  std::string message;
  bool watching = false;
};

// Never destroyed: the watching thread may outlive main()'s return by a moment.
ExitDeadline& exit_deadline() {
  static auto* state = new ExitDeadline;
  return *state;
}

[[noreturn]] void watch(ExitDeadline& state) {
  std::unique_lock<std::mutex> lock(state.mutex);
  for (;;) {
    const auto deadline = *state.deadline;
    if (state.changed.wait_until(lock, deadline, [&] { return *state.deadline != deadline; })) continue;
    spdlog::error("{}", state.message);
    spdlog::default_logger()->flush();
    std::_Exit(1);
  }
}

}  // namespace

void exit_unless_ended_within(double seconds, const std::string& message) {
  ExitDeadline& state = exit_deadline();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.deadline = DeadlineClock::now() +
                   std::chrono::duration_cast<DeadlineClock::duration>(std::chrono::duration<double>(seconds));
  state.message = message;
  if (!state.watching) {
    state.watching = true;
    std::thread([&state] { watch(state); }).detach();
  } else {
    state.changed.notify_all();
  }
}

}  // namespace nmt
