// OpenBLAS's kernels for this CPU. Debian's OpenBLAS (0.3.21, built for every x86-64 CPU) picks
// its kernels when it loads, from the CPU's model number; a model it does not know (an Intel Xeon
// newer than it, or one under a hypervisor with a generic name) gets its SSE3 "Prescott" kernels,
// every product several times slower than the CPU can run, and nothing says so. OpenBLAS reads
// OPENBLAS_CORETYPE only when it loads, before main(): so when the pick is below what the CPU runs
// (kernels/available.h) and the user set no core type, the program restarts itself once with the
// right one (restart_for_blas), and says so at debug level.
//
// NMT_BLAS_CORETYPE: unset, the above; "off", never restart; "force", restart even when
// OPENBLAS_CORETYPE is set (the tests use it to make OpenBLAS pick low on any CPU).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kernels/available.h"

namespace nmt {

// The ISA rank of an OpenBLAS x86-64 core name, compared without case as OpenBLAS does: 0 SSE, 1
// AVX, 2 AVX2 and FMA, 3 AVX-512, 4 AVX512_BF16. None for a name not listed (a newer OpenBLAS's
// "SapphireRapids", say), which is never taken as below anything.
std::optional<int> blas_core_rank(std::string_view name);

// The best core of OpenBLAS 0.3.21's list that a CPU with `features` runs; "" below AVX.
std::string best_blas_core(const kernels::CpuFeatures& features);

// The core to ask for when OpenBLAS's pick `current` ranks below the best for `features`; none
// otherwise.
std::optional<std::string> wanted_blas_core(std::string_view current, const kernels::CpuFeatures& features);

// First thing in main(): when OpenBLAS is loaded (not another BLAS), built for several CPUs, and
// picked a core below this CPU's best, and neither OPENBLAS_CORETYPE nor NMT_BLAS_CORETYPE says
// otherwise, sets OPENBLAS_CORETYPE and restarts the program (execv of /proc/self/exe, the same
// arguments, descriptors and process id): does not return then. Otherwise returns the line to log at
// debug level once logging is set up ("" for none). Throws std::invalid_argument for an
// NMT_BLAS_CORETYPE other than off or force.
std::string restart_for_blas(char** argv);

// For a process that cannot restart (the Python module in its interpreter): what restart_for_blas
// would set, as advice ("" when OpenBLAS's pick is right, not OpenBLAS, or set by the user).
std::string blas_core_advice();

}  // namespace nmt
