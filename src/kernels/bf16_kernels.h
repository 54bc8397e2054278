// Kernels for training in bfloat16 on a CPU (precision bf16, model/linear/bf16_products.h): conversions
// between float32 and bfloat16, and the recurrent loops' products on AMX tiles.
//
// Conversions (AVX-512): rounding to nearest with ties to even, as LibTorch's float-to-bfloat16
// conversion, so either gives the same bits (a NaN becomes 0xFFFF, as in its vectorized loop); the
// widening can add a row vector (a bias) on the way. They replace LibTorch's conversions of the
// large products' factors and results.
//
// Products: what a LoopWeight (model/linear/loop_weight.h) multiplies by when a training step runs in bf16.
// The weight is rounded and packed once per loop (pack_weight_bf16); each step rounds its few rows
// of activations the same way and multiplies them, on AMX tiles (Intel Sapphire Rapids and later:
// 16 x 16 float32 sums per tile over 32 bfloat16 products each) or, on a CPU with AVX512_BF16 and no
// AMX (AMD Zen 4, Intel Cooper Lake), with vdpbf16ps (16 float32 sums per instruction, over 2
// products each). Both read the same packed panels. bf16_reference gives the same product in plain
// C++, summed in another order (the tests').
//
// Shapes as kernels/packed_gemm.h: a [rows, depth] row-major with leading dimension lda; the weight
// b [depth, columns] row-major; c [rows, columns] with leading dimension ldc.
#pragma once

#include <cstdint>

#include "kernels/available.h"

namespace nmt::kernels {

constexpr int64_t kBf16Panel = 16;  // columns per packed panel (one tile's float32 row)
constexpr int64_t kBf16Depth = 32;  // depth per tile product; the packed depth is a multiple of it

// The depth of a packed weight: `depth` padded with zeros to a multiple of 32.
inline int64_t padded_bf16_depth(int64_t depth) { return (depth + kBf16Depth - 1) / kBf16Depth * kBf16Depth; }

// bfloat16 values (uint16_t) needed to pack a [depth, columns] weight: whole panels of 16 columns,
// each of the padded depth.
inline int64_t packed_bf16_size(int64_t depth, int64_t columns) {
  return (columns + kBf16Panel - 1) / kBf16Panel * kBf16Panel * padded_bf16_depth(depth);
}

// out[i] = bfloat16(in[i]) (bits), i < count. Only after bf16_kernels_available().
void round_to_bf16(const float* in, uint16_t* out, int64_t count);
// out[i] = float(in[i]) + (add ? add[i] : 0), i < count. Only after bf16_kernels_available().
void widen_bf16(const uint16_t* in, const float* add, float* out, int64_t count);

// Packs b [depth, columns] (row stride ldb) as bfloat16 panels of 16 columns, each a tile's B
// operand layout: packed[p * D * 16 + (k / 2) * 32 + 2 j + k % 2] = b[k, 16 p + j], D the padded
// depth, zeros past the last row and column: 32 bits per column for each pair of depths, as
// vdpbf16ps reads them too. Only after bf16_kernels_available().
void pack_weight_bf16(const float* b, int64_t ldb, int64_t depth, int64_t columns, uint16_t* packed);

// c[r, j] = init[r, j] + sum_k bf16(a[r, k]) bf16(b[k, j]) for rows r < rows and columns j in
// [column_begin, column_end) (column_begin a multiple of 16); init as in gemm_packed_avx512 (null,
// a bias with init_ld 0, or a matrix; it may be c). Only after amx_kernels_available().
void gemm_bf16_amx(const float* a, int64_t lda, const uint16_t* packed, int64_t depth, int64_t columns, int64_t rows,
                   int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c, int64_t ldc);
// The same product with AVX512_BF16's vdpbf16ps. Only after avx512_bf16_kernels_available().
void gemm_bf16_avx512(const float* a, int64_t lda, const uint16_t* packed, int64_t depth, int64_t columns, int64_t rows,
                      int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                      int64_t ldc);

// The same product in plain C++ from the unpacked weight (float32 sums in order of k), any CPU.
void bf16_reference(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t depth, int64_t columns,
                    int64_t rows, const float* init, int64_t init_ld, float* c, int64_t ldc);

}  // namespace nmt::kernels
