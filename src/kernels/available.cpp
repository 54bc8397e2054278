// Compiled without -mavx2 (unlike the kernels), so that asking is safe on any CPU.
#include "kernels/available.h"

namespace nmt::kernels {

bool avx2_kernels_available() {
#if NMT_AVX2_KERNELS
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
#else
  return false;
#endif
}

bool avx512_kernels_available() {
#if NMT_AVX512_KERNELS
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
#else
  return false;
#endif
}

bool vnni_kernels_available() {
#if NMT_VNNI_KERNELS
  static const bool available =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  return available;
#else
  return false;
#endif
}

}  // namespace nmt::kernels
