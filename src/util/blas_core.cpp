#include "util/blas_core.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace nmt {

namespace {

// Set in the restarted process to the core OpenBLAS had picked: it stops a second restart, and
// the restarted process logs it, then unsets it, so that child processes (training ranks, the
// tests' nmt) inherit only OPENBLAS_CORETYPE and say nothing.
constexpr const char* kRestarted = "NMT_BLAS_RESTARTED";

// OpenBLAS's own functions, where the BLAS that LibTorch loaded is OpenBLAS.
const char* openblas_text(const char* function) {
  auto* get = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, function));
  return get != nullptr ? get() : nullptr;
}

// The core OpenBLAS picked, where it is OpenBLAS built for several CPUs (a build for one CPU
// ignores OPENBLAS_CORETYPE); null otherwise.
const char* switchable_openblas_core() {
  const char* core = openblas_text("openblas_get_corename");
  const char* config = openblas_text("openblas_get_config");
  return core != nullptr && config != nullptr && std::strstr(config, "DYNAMIC_ARCH") != nullptr ? core : nullptr;
}

}  // namespace

std::optional<int> blas_core_rank(std::string_view name) {
  struct Core {
    const char* name;
    int rank;
  };
  static const Core kCores[] = {
      {"Katmai", 0},  {"Coppermine", 0},  {"Northwood", 0},    {"Prescott", 0},   {"Banias", 0},
      {"Atom", 0},    {"Core2", 0},       {"Penryn", 0},       {"Dunnington", 0}, {"Nehalem", 0},
      {"Athlon", 0},  {"Opteron", 0},     {"Opteron_SSE3", 0}, {"Barcelona", 0},  {"Nano", 0},
      {"Bobcat", 0},  {"Sandybridge", 1}, {"Bulldozer", 1},    {"Piledriver", 1}, {"Steamroller", 1},
      {"Haswell", 2}, {"Excavator", 2},   {"Zen", 2},          {"SkylakeX", 3},   {"Cooperlake", 4}};
  for (const Core& core : kCores) {
    if (name.size() == std::strlen(core.name) && ::strncasecmp(name.data(), core.name, name.size()) == 0) {
      return core.rank;
    }
  }
  return std::nullopt;
}

std::string best_blas_core(const kernels::CpuFeatures& features) {
  if (features.avx512_bf16) return "Cooperlake";
  if (features.avx512) return "SkylakeX";
  if (features.avx2_fma) return features.amd ? "Zen" : "Haswell";
  if (features.avx) return "Sandybridge";
  return "";
}

std::optional<std::string> wanted_blas_core(std::string_view current, const kernels::CpuFeatures& features) {
  const std::string best = best_blas_core(features);
  const std::optional<int> have = blas_core_rank(current);
  if (best.empty() || !have || *have >= *blas_core_rank(best)) return std::nullopt;
  return best;
}

std::string restart_for_blas(char** argv) {
  const char* mode = std::getenv("NMT_BLAS_CORETYPE");
  const std::string wanted_mode = mode != nullptr ? mode : "";
  if (!wanted_mode.empty() && wanted_mode != "off" && wanted_mode != "force") {
    throw std::invalid_argument("NMT_BLAS_CORETYPE=" + wanted_mode +
                                ": off (never restart for OpenBLAS's kernels) or force (even when "
                                "OPENBLAS_CORETYPE is set); unset it for the default");
  }
  const char* core = openblas_text("openblas_get_corename");
  if (const char* picked = std::getenv(kRestarted)) {
    const char* asked = std::getenv("OPENBLAS_CORETYPE");
    const std::string note =
        std::string("BLAS: OpenBLAS picked its ") + picked +
        " kernels, below this CPU's; restarted with OPENBLAS_CORETYPE=" + (asked != nullptr ? asked : "?") + " (now " +
        (core != nullptr ? core : "?") + ")";
    ::unsetenv(kRestarted);
    return note;
  }
  if (switchable_openblas_core() == nullptr) return "";
  const std::string runs = std::string("BLAS: OpenBLAS runs its ") + core + " kernels";
  if (wanted_mode == "off") return runs + " (NMT_BLAS_CORETYPE=off)";
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr && wanted_mode != "force") return runs + " (OPENBLAS_CORETYPE)";
  const std::optional<std::string> wanted = wanted_blas_core(core, kernels::cpu_features());
  if (!wanted) return runs;
  ::setenv("OPENBLAS_CORETYPE", wanted->c_str(), 1);
  ::setenv(kRestarted, core, 1);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  // No /proc, or exec refused: go on with the slow kernels, and say what to set.
  const std::string failed = runs + ", below this CPU's " + *wanted + "; restarting failed (" + std::strerror(errno) +
                             "): set OPENBLAS_CORETYPE=" + *wanted;
  ::unsetenv(kRestarted);
  ::unsetenv("OPENBLAS_CORETYPE");
  return failed;
}

std::string blas_core_advice() {
  const char* core = switchable_openblas_core();
  if (core == nullptr || std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  const std::optional<std::string> wanted = wanted_blas_core(core, kernels::cpu_features());
  if (!wanted) return "";
  return std::string("BLAS: OpenBLAS runs its ") + core + " kernels, below this CPU's " + *wanted +
         ": set OPENBLAS_CORETYPE=" + *wanted + " before starting Python for products several times faster";
}

}  // namespace nmt
