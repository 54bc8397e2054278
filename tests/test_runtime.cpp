#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/runtime.h"
#include "util/team.h"

using namespace nmt;

TEST_CASE("run_in_parallel runs every task once, on several threads, then restores the thread count", "[runtime]") {
  torch::set_num_threads(2);
  std::vector<std::atomic<int>> runs(40);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> inner_threads_above_one{0};
  run_in_parallel(3, runs.size(), [&](size_t index) {
    runs[index]++;
    if (torch::get_num_threads() != 1) inner_threads_above_one++;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // so that no single thread takes them all
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  for (const auto& count : runs) CHECK(count == 1);
  CHECK(threads.size() > 1);
  CHECK(inner_threads_above_one == 0);
  CHECK(torch::get_num_threads() == 2);
}

TEST_CASE("run_in_parallel rethrows a task's exception after all threads stop", "[runtime]") {
  torch::set_num_threads(2);
  std::atomic<int> started{0};
  CHECK_THROWS_WITH(run_in_parallel(2, 100,
                                    [&](size_t index) {
                                      started++;
                                      if (index == 3) throw std::runtime_error("task 3 failed");
                                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                    }),
                    "task 3 failed");
  CHECK(started < 100);  // the remaining tasks were skipped
  CHECK(torch::get_num_threads() == 2);
}

TEST_CASE("denormal floats count as 0 on the main thread, run_in_parallel's workers and a team's threads",
          "[runtime]") {
  // 1e-30 * 1e-10 = 1e-40 is a denormal float: 0 under flush-to-zero, about 1e-40 otherwise.
  const auto underflows = [] { return (torch::full({4}, 1e-30f) * 1e-10f).max().item<float>() == 0.0f; };
  set_threads(2);
  CHECK(underflows());
  std::vector<int> flushed(4, 0);
  run_in_parallel(2, 4, [&](size_t task) { flushed[task] = underflows() ? 1 : 0; });
  CHECK(flushed == std::vector<int>(4, 1));
  std::atomic<int> team_flushed{0};
  run_as_team([&](Team& team) { team.phase([&] { team_flushed += underflows() ? 1 : 0; }); });
  CHECK(team_flushed.load() == std::max(1, at::get_num_threads()));
}
