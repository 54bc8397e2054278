#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "cli_helpers.h"
#include "util/blas_core.h"
#include "util/runtime.h"
#include "util/team.h"

using namespace nmt;

TEST_CASE("run_in_parallel runs every task once, on several threads, then restores the thread count", "[runtime]") {
  torch::set_num_threads(2);
  std::vector<std::atomic<int>> runs(40);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> inner_threads_above_one{0};
  const auto thread_count = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return threads.size();
  };
  run_in_parallel(3, runs.size(), [&](size_t index) {
    runs[index]++;
    if (torch::get_num_threads() != 1) inner_threads_above_one++;
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    // The first task holds its thread until another thread has taken a task: run on one thread
    // alone, the tasks fail the check below (after the wait), whatever the scheduling.
    if (index == 0) nmt::testing::wait_until([&] { return thread_count() > 1; }, 30);
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

TEST_CASE("OpenBLAS's kernels: a core below what the CPU runs is replaced by the best it runs", "[runtime]") {
  kernels::CpuFeatures sse;
  kernels::CpuFeatures avx = sse;
  avx.avx = true;
  kernels::CpuFeatures avx2 = avx;
  avx2.avx2_fma = true;
  kernels::CpuFeatures amd_avx2 = avx2;
  amd_avx2.amd = true;
  kernels::CpuFeatures avx512 = avx2;
  avx512.avx512 = true;
  kernels::CpuFeatures bf16 = avx512;
  bf16.avx512_bf16 = true;
  CHECK(wanted_blas_core("Prescott", avx2) == "Haswell");
  CHECK(wanted_blas_core("Prescott", amd_avx2) == "Zen");
  CHECK(wanted_blas_core("Sandybridge", avx512) == "SkylakeX");
  CHECK(wanted_blas_core("Haswell", avx512) == "SkylakeX");
  CHECK(wanted_blas_core("PRESCOTT", bf16) == "Cooperlake");  // OpenBLAS compares without case
  CHECK(wanted_blas_core("Zen", bf16) == "Cooperlake");
  CHECK(wanted_blas_core("Nehalem", avx) == "Sandybridge");
  // Already the best, better than asked, or a name this list does not know: left alone.
  CHECK_FALSE(wanted_blas_core("SkylakeX", avx512));
  CHECK_FALSE(wanted_blas_core("Cooperlake", avx512));
  CHECK_FALSE(wanted_blas_core("Haswell", amd_avx2));
  CHECK_FALSE(wanted_blas_core("Zen", avx2));
  CHECK_FALSE(wanted_blas_core("SapphireRapids", bf16));
  CHECK_FALSE(wanted_blas_core("Bogus", avx2));
  CHECK_FALSE(wanted_blas_core("Nehalem", sse));  // below AVX nothing is better
  CHECK(best_blas_core(sse).empty());
  // This CPU's features agree with the kernels' own checks where the build has them.
  const kernels::CpuFeatures here = kernels::cpu_features();
  if (kernels::avx2_kernels_available()) CHECK(here.avx2_fma);
  if (kernels::avx512_bf16_kernels_available()) CHECK(here.avx512_bf16);
}

TEST_CASE("nmt restarts once with OpenBLAS's right kernels, and says so at debug level only", "[runtime][cli]") {
  using nmt::testing::run_nmt;
  auto* config = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const std::string best = best_blas_core(kernels::cpu_features());
  if (config == nullptr || std::string(config()).find("DYNAMIC_ARCH") == std::string::npos || best.empty()) {
    return nmt::testing::skip_case("the BLAS is not OpenBLAS built for several CPUs, or this CPU has no AVX");
  }
  // OPENBLAS_CORETYPE=Prescott makes OpenBLAS pick low on any CPU; NMT_BLAS_CORETYPE=force makes
  // nmt treat that as OpenBLAS's own pick.
  const std::string low = "OPENBLAS_CORETYPE=Prescott NMT_BLAS_CORETYPE=force";
  const auto restarted = run_nmt("--help", low + " SPDLOG_LEVEL=debug");
  INFO(restarted.output);
  CHECK(restarted.status == 0);
  CHECK_THAT(restarted.output, Catch::Contains("BLAS: OpenBLAS picked its Prescott kernels") &&
                                   Catch::Contains("restarted with OPENBLAS_CORETYPE=" + best + " (now " + best));
  // Without debug logging, nothing is said; a user's own OPENBLAS_CORETYPE is kept.
  const auto quiet = run_nmt("--help", low);
  CHECK(quiet.status == 0);
  CHECK(quiet.output.find("BLAS") == std::string::npos);
  const auto kept = run_nmt("--help", "OPENBLAS_CORETYPE=Prescott SPDLOG_LEVEL=debug");
  CHECK_THAT(kept.output, Catch::Contains("OpenBLAS runs its Prescott kernels (OPENBLAS_CORETYPE)"));
  const auto off = run_nmt("--help", "NMT_BLAS_CORETYPE=off SPDLOG_LEVEL=debug");
  CHECK(off.output.find("restarted") == std::string::npos);
  const auto bad = run_nmt("--help", "NMT_BLAS_CORETYPE=always");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.output, Catch::Contains("NMT_BLAS_CORETYPE=always: off") && Catch::Contains("or force"));
}
