// Compiled without -mavx2 (unlike row_kernels.cpp), so that asking is safe on any CPU.
#include "kernels/row_kernels.h"

namespace nmt::kernels {

extern const bool kRowKernelsBuilt;  // row_kernels.cpp: whether it was compiled for AVX2 and FMA

bool row_kernels_available() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool available =
      kRowKernelsBuilt && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
#else
  return false;
#endif
}

}  // namespace nmt::kernels
