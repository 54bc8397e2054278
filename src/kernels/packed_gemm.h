// Matrix products for the recurrent loops, with the weight packed once per loop (AVX-512 or AVX2).
//
// Inside a decoder loop every step multiplies a few rows (one batch) by the same weights, and a
// BLAS call repacks the whole weight into its own layout on every call: measured here, packing
// was about a sixth of a training update's time. These products take the weight already packed
// (pack_weight_*, once per pass over the loop) and run a register-blocked FMA kernel over it (8 x 32
// with AVX-512, packed_gemm.cpp; 6 x 16 with AVX2, packed_gemm_avx2.cpp), so a step's product costs
// only its arithmetic. The two share the packed layout. Reached only through kernels/dispatch.h
// (use_kernel(Operation::kPackedProducts)) and model/linear/loop_weight.h, which picks the kernel of the
// level in force (kernel_level()).
//
// Shapes: a [rows, depth] row-major with leading dimension lda; the weight b [depth, columns]
// row-major (packed); c [rows, columns] with leading dimension ldc.
#pragma once

#include <cstdint>

#include "kernels/available.h"

namespace nmt::kernels {

constexpr int64_t kPanelWidth = 16;  // columns per packed panel (one 512-bit register of floats)

// Floats needed to pack a [depth, columns] weight: whole panels, the last one padded with zeros.
inline int64_t packed_size(int64_t depth, int64_t columns) {
  return (columns + kPanelWidth - 1) / kPanelWidth * kPanelWidth * depth;
}

// Packs b [depth, columns] (row-major, row stride ldb) into panels of 16 columns, each panel
// depth x 16 floats, row by row: packed[(p * depth + k) * 16 + j] = b[k, 16 p + j]. The same
// panels with either instruction set.
void pack_weight_avx512(const float* b, int64_t ldb, int64_t depth, int64_t columns, float* packed);
void pack_weight_avx2(const float* b, int64_t ldb, int64_t depth, int64_t columns, float* packed);

// c[r, j] = init[r, j] + sum_k a[r, k] b[k, j] for rows r < rows and columns j in
// [column_begin, column_end) (column_begin a multiple of 16). init is null (zero), a row vector
// (init_ld 0: a bias), or a matrix with row stride init_ld; it may be c itself (c += a b).
void gemm_packed_avx512(const float* a, int64_t lda, const float* packed, int64_t depth, int64_t columns, int64_t rows,
                        int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                        int64_t ldc);
void gemm_packed_avx2(const float* a, int64_t lda, const float* packed, int64_t depth, int64_t columns, int64_t rows,
                      int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                      int64_t ldc);

}  // namespace nmt::kernels
