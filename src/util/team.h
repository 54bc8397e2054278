// A team of LibTorch's threads that go through a loop's phases together, with a barrier between
// phases: inside a phase each thread works on its own share (a block of rows or columns), and
// after it every thread sees what the others wrote. Used by the fused recurrent loops
// (model/decoder_fused.cpp, model/bigru_fused.cpp). Inside the team LibTorch's operators and
// OpenBLAS (its OpenMP build) run single-threaded, as in any parallel region.
#pragma once

#include <ATen/Parallel.h>
#include <omp.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

namespace nmt {

// One thread's view of the team: its index, its shares, and the phases.
class Team {
 public:
  Team(int64_t index, int64_t count, std::atomic<bool>& failed, std::exception_ptr& error, std::mutex& error_mutex)
      : index_(index), count_(count), failed_(failed), error_(error), error_mutex_(error_mutex) {}

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

  // Runs this thread's part of a phase, then waits for the others. After an exception in any
  // thread the remaining phases are skipped, but every thread still meets every barrier.
  template <typename Work>
  void phase(const Work& work) {
    if (!failed_.load()) {
      try {
        work();
      } catch (...) {  // nothing may leave an OpenMP region
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true);
      }
    }
#pragma omp barrier
  }

 private:
  int64_t index_, count_;
  std::atomic<bool>& failed_;
  std::exception_ptr& error_;
  std::mutex& error_mutex_;
};

// Runs body(team) on every thread of a team as large as LibTorch's (so libgomp reuses its pool),
// without gradients; rethrows the first exception.
template <typename Body>
void run_as_team(const Body& body) {
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(std::max(1, at::get_num_threads()))
  {
    torch::NoGradGuard no_grad;  // grad mode is per thread
    Team team(omp_get_thread_num(), omp_get_num_threads(), failed, error, error_mutex);
    body(team);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace nmt
