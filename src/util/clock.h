// Wall-clock intervals, on the monotonic clock (a changed system time never bends them).
#pragma once

#include <chrono>

namespace nmt {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace nmt
