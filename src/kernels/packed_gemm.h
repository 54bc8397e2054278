// Matrix products for the recurrent loops, with the weight packed once per loop (AVX-512).
//
// Inside a decoder loop every step multiplies a few rows (one batch) by the same weights, and a
// BLAS call repacks the whole weight into its own layout on every call: measured here, packing
// was about a sixth of a training update's time. These products take the weight already packed
// (pack_weight, once per pass over the loop) and run an 8 x 32 register-blocked FMA kernel over
// it, so a step's product costs only its arithmetic. Reached only through kernels/dispatch.h
// (use_kernel(Operation::kPackedProducts)), which runs them only where the CPU has AVX-512.
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
// depth x 16 floats, row by row: packed[(p * depth + k) * 16 + j] = b[k, 16 p + j].
void pack_weight(const float* b, int64_t ldb, int64_t depth, int64_t columns, float* packed);

// c[r, j] = init[r, j] + sum_k a[r, k] b[k, j] for rows r < rows and columns j in
// [column_begin, column_end) (column_begin a multiple of 16). init is null (zero), a row vector
// (init_ld 0: a bias), or a matrix with row stride init_ld; it may be c itself (c += a b).
void gemm_packed(const float* a, int64_t lda, const float* packed, int64_t depth, int64_t columns, int64_t rows,
                 int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c, int64_t ldc);

}  // namespace nmt::kernels
