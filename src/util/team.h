// A team of LibTorch's threads that go through a loop's phases together, with a barrier between
// phases: inside a phase each thread works on its own share (a block of rows or columns), and
// after it every thread sees what the others wrote. Used by the fused recurrent loops
// (model/fused_cpu/decoder_pass.cpp, model/fused_cpu/bigru_layer.cpp). Inside the team LibTorch's operators and
// OpenBLAS (its OpenMP build) run single-threaded, as in any parallel region.
//
// An exception anywhere in a thread, inside a phase or between phases, ends the team's work: the
// remaining phases are skipped, the barrier lets every thread through, and run_as_team rethrows
// the first exception once all threads are out. (OpenMP's own barrier cannot be left: a thread
// that threw between phases would leave the others waiting forever, and an exception leaving
// the parallel region ends the process.)
#pragma once

#include <ATen/Parallel.h>
#include <omp.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "util/runtime.h"

namespace nmt {

// A barrier for a team's threads that a failure can open for good: after break_open(), wait()
// returns at once, in every thread.
class TeamBarrier {
 public:
  void set_count(int count) { count_ = count; }

  void wait() {
    const int generation = generation_.load(std::memory_order_acquire);
    if (broken_.load(std::memory_order_acquire)) return;
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {  // the last to arrive
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(generation + 1, std::memory_order_release);
      return;
    }
    // Spin (the others are usually a few microseconds behind), then yield the core.
    for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
      if (broken_.load(std::memory_order_acquire)) return;
      if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

  void break_open() { broken_.store(true, std::memory_order_release); }

 private:
  int count_ = 1;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
  std::atomic<bool> broken_{false};
};

// What a team's threads share: the barrier and the first exception.
struct TeamState {
  TeamBarrier barrier;
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;

  // Records the current exception (the first one wins) and opens the barrier.
  void fail() {
    {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
    failed.store(true);
    barrier.break_open();
  }
};

// One thread's view of the team: its index, its shares, and the phases.
class Team {
 public:
  Team(int64_t index, int64_t count, TeamState& state) : index_(index), count_(count), state_(state) {}

  // This thread's share [begin, end) of `total` rows or columns, in multiples of `multiple` (for
  // columns: 16 floats, so that blocks start on a packed-weight panel and no two threads write to
  // one cache line). Threads past the end get an empty share.
  std::pair<int64_t, int64_t> share(int64_t total, int64_t multiple = 1) const {
    const int64_t chunk = ((total + count_ - 1) / count_ + multiple - 1) / multiple * multiple;
    const int64_t begin = std::min(total, index_ * chunk);
    return {begin, std::min(total, begin + chunk)};
  }

  // This thread's share of the rows [begin, end).
  std::pair<int64_t, int64_t> rows(int64_t begin, int64_t end) const {
    const auto [first, last] = share(end - begin);
    return {begin + first, begin + last};
  }

  // This thread's index in the team, and the team's size.
  int64_t index() const { return index_; }
  int64_t count() const { return count_; }

  // Runs this thread's part of a phase, then waits for the others. After an exception in any
  // thread the remaining phases are skipped.
  template <typename Work>
  void phase(const Work& work) {
    if (!state_.failed.load()) {
      try {
        work();
      } catch (...) {  // nothing may leave an OpenMP region
        state_.fail();
      }
    }
    state_.barrier.wait();
  }

 private:
  int64_t index_, count_;
  TeamState& state_;
};

// Runs body(team) on every thread of a team as large as LibTorch's (so libgomp reuses its pool),
// without gradients; rethrows the first exception, whether it came from a phase or from between
// phases.
template <typename Body>
void run_as_team(const Body& body) {
  TeamState state;
#pragma omp parallel num_threads(std::max(1, at::get_num_threads()))
  {
#pragma omp single
    state.barrier.set_count(omp_get_num_threads());  // the team OpenMP gave (its implied barrier follows)
    try {
      torch::NoGradGuard no_grad;  // grad mode is per thread
      flush_denormals();           // and so is the floating-point mode
      Team team(omp_get_thread_num(), omp_get_num_threads(), state);
      body(team);
    } catch (...) {  // between phases: the others must not wait for this thread
      state.fail();
    }
  }
  if (state.error) std::rethrow_exception(state.error);
}

}  // namespace nmt
