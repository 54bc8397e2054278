// Symmetric int8 matrix products for decoding with compute type int8 (model/linear/int8_linear.h), as
// CTranslate2's and Marian's int8 CPU paths do: a weight W [rows, depth] quantized once per row
// (q = round(W / s), s = max|W_row| / 127), activations x [m, depth] per row on the fly
// (a = round(x / t), t = max|x_row| / L), and
//   y[i, n] = (sum_k a[i, k] q[n, k]) * (t_i * s_n) + bias[n]
// with the dot products summed exactly in int32. Three kernels give the same integer sums for the
// same activations:
//   - AVX-512 VNNI (vpdpbusd): u8 x s8 products of 4 depths a lane, the activations shifted to
//     unsigned (a + 128) and 128 * sum_k q[n, k] taken off after; L = 127;
//   - AVX2: vpmaddubsw on the activations shifted to unsigned (a + 32) and q, two groups of
//     depths added in int16, then vpmaddwd into int32, 32 * sum_k q[n, k] taken off after.
//     vpmaddubsw adds each pair of products in int16, saturating, and the two groups' pairs add in
//     int16 too: with |a| <= 31 that is at most 4 * 63 * 127 = 32004, so the activations are
//     quantized to L = 31 (6 bits). With L = 63 (7 bits, as fbgemm's reduce_range) only one
//     group fits, and each vpmaddubsw needs its own vpmaddwd: four multiplying instructions per
//     64 multiply-adds of a row instead of three (docs/dev/performance-notes.md has what that costs). The sign
//     trick that keeps 8 bits (|a| times q carrying a's sign) adds abs and sign to the instructions;
//   - a plain reference, behind NMT_KERNELS=off; L = 127.
// Reached through kernels/dispatch.h (Operation::kInt8Products) and model/linear/int8_linear.h only.
//
// Layout: the quantized weight is packed in panels of 16 rows (16 output columns), each panel a
// run of groups of 4 depths: packed[((p * groups + g) * 16 + j) * 4 + i] = q[16 p + j, 4 g + i],
// zero past the last row and depth. Activations are int8 rows of int8_depth(depth) bytes (zero
// padded).
#pragma once

#include <cstdint>

namespace nmt::kernels {

constexpr int64_t kInt8PanelRows = 16;
constexpr int64_t kInt8Group = 4;

inline int64_t int8_depth(int64_t depth) { return (depth + kInt8Group - 1) / kInt8Group * kInt8Group; }
inline int64_t int8_panels(int64_t rows) { return (rows + kInt8PanelRows - 1) / kInt8PanelRows; }
inline int64_t int8_packed_size(int64_t rows, int64_t depth) {
  return int8_panels(rows) * kInt8PanelRows * int8_depth(depth);
}

// Packs q [rows, depth] (row stride ldq) as above into `packed` (int8_packed_size bytes).
void pack_int8_weight(const int8_t* q, int64_t ldq, int64_t rows, int64_t depth, int8_t* packed);

// The largest activation magnitude L each kernel takes (above).
constexpr int32_t kInt8Limit = 127;
constexpr int32_t kInt8Avx2Limit = 31;

// Quantizes x [m, depth] (row stride ldx) per row to [-limit, limit]: a [m, int8_depth(depth)]
// (padding zero) and each row's scale t = max|x_row| / limit (1 for a row of zeros). Rounds to
// nearest, ties to even.
void quantize_int8_rows(const float* x, int64_t ldx, int64_t m, int64_t depth, int32_t limit, int8_t* a,
                        float* row_scale);
// The same, eight floats at a time with AVX2: the same bytes and scales.
void quantize_int8_rows_avx2(const float* x, int64_t ldx, int64_t m, int64_t depth, int32_t limit, int8_t* a,
                             float* row_scale);

// c[i, n] = dot(a_i, q_n) * (row_scale[i] * scale[n]) + bias[n] (bias may be null) for rows
// i < m and output columns n in [column_begin, column_end), column_begin a multiple of 16;
// `columns` is the weight's row count. c has row stride ldc. `column_sums` (VNNI and AVX2):
// sum_k q[n, k] for every n < columns. The AVX2 kernel needs |a| <= kInt8Avx2Limit.
struct Int8Product {
  const int8_t* a;
  int64_t m;
  const int8_t* packed;
  int64_t depth;
  int64_t columns;
  const float* row_scale;
  const float* scale;
  const float* bias;
  const int32_t* column_sums;
  float* c;
  int64_t ldc;
};
void int8_gemm_reference(const Int8Product& product, int64_t column_begin, int64_t column_end);
void int8_gemm_avx2(const Int8Product& product, int64_t column_begin, int64_t column_end);
void int8_gemm_vnni(const Int8Product& product, int64_t column_begin, int64_t column_end);

}  // namespace nmt::kernels
