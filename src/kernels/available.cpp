// Compiled without -mavx2 (unlike the kernels), so that asking is safe on any CPU.
#include "kernels/available.h"

#include "kernels/bf16_kernels.h"

#include <cpuid.h>

#if NMT_BF16_KERNELS
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace nmt::kernels {

CpuFeatures cpu_features() {
  __builtin_cpu_init();
  CpuFeatures features;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // The vendor string's first four bytes: "Auth" (AuthenticAMD) or "Hygo" (HygonGenuine).
  features.amd = __get_cpuid(0, &eax, &ebx, &ecx, &edx) && (ebx == 0x68747541 || ebx == 0x6f677948);
  features.avx = __builtin_cpu_supports("avx");
  features.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  features.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  // CPUID leaf 7 (read directly: not every compiler's __builtin_cpu_supports knows these names):
  // AMX-BF16 is EDX bit 22 and AMX-TILE bit 24 of subleaf 0, AVX512_BF16 EAX bit 5 of subleaf 1.
  // AMX also needs the system to save the tile state (XCR0 bits 17 and 18; AVX-512's check above
  // implies that XGETBV may be run).
  if (features.avx512 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    features.amx_bf16 = ((edx >> 22) & 1u) != 0 && ((edx >> 24) & 1u) != 0 && (xcr0_low & (3u << 17)) == (3u << 17);
    features.avx512_bf16 = eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 5) & 1u) != 0;
  }
  return features;
}

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

bool bf16_kernels_available() {
#if NMT_BF16_KERNELS
  static const bool available =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return available;
#else
  return false;
#endif
}

bool avx512_bf16_kernels_available() {
#if NMT_BF16_KERNELS
  static const bool available = bf16_kernels_available() && cpu_features().avx512_bf16;
  return available;
#else
  return false;
#endif
}

bool amx_kernels_available() {
#if NMT_BF16_KERNELS
  static const bool available = [] {
    // Linux gives a process the tile data only when asked (arch_prctl ARCH_REQ_XCOMP_PERM, feature
    // 18); oneDNN asks the same way.
    if (!bf16_kernels_available() || !cpu_features().amx_bf16) return false;
#ifdef SYS_arch_prctl
    constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
    return false;  // not Linux: no way here to ask for the tile data
#endif
  }();
  return available;
#else
  return false;
#endif
}

}  // namespace nmt::kernels
