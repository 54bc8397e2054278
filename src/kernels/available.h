// The hand-vectorized CPU kernels of src/kernels: who may call them.
//
// They are compiled for x86-64 CPUs with AVX2 and FMA (Intel Haswell and AMD Excavator, 2013-15,
// and later) while the rest of the build stays generic x86-64. avx2_kernels_available() says
// whether this build has them and this CPU runs them; kernels/dispatch.h decides from it (and from
// NMT_KERNELS) whether they run or the LibTorch reference operations do. The kernels are pure C++, no
// LibTorch, single-threaded: callers split the work (at::parallel_for).
#pragma once

namespace nmt::kernels {

// What this CPU runs, whatever this build has: for choosing another library's kernels
// (util/blas_core.h).
struct CpuFeatures {
  bool amd = false;  // AMD or Hygon: OpenBLAS names their AVX2 kernels "Zen"
  bool avx = false;
  bool avx2_fma = false;     // AVX2 and FMA
  bool avx512 = false;       // AVX-512 F, BW, VL and DQ
  bool avx512_bf16 = false;  // and AVX512_BF16
  bool amx_bf16 = false;     // AVX-512 as above, AMX-BF16 and AMX-TILE, with the tile state saved
};
CpuFeatures cpu_features();

bool avx2_kernels_available();

// The same for the AVX-512 kernels (kernels/packed_gemm.h): this build has them and this CPU
// runs AVX-512F (Intel Skylake-SP, 2017, and later; AMD Zen 4).
bool avx512_kernels_available();
// AVX-512 VNNI (with AVX-512F and BW): the int8 products of kernels/int8_gemm.h.
bool vnni_kernels_available();
// AVX-512 F, BW and VL: the bfloat16 conversions of kernels/bf16_kernels.h.
bool bf16_kernels_available();
// Those and AVX512_BF16 (AMD Zen 4, Intel Cooper Lake and Sapphire Rapids and later): the vdpbf16ps
// product of kernels/bf16_kernels.h.
bool avx512_bf16_kernels_available();
// Those of bf16_kernels_available() and AMX-TILE and AMX-BF16, with the operating system's leave
// to use tile data (Linux grants it once asked, arch_prctl): the tile product of
// kernels/bf16_kernels.h.
bool amx_kernels_available();

}  // namespace nmt::kernels
