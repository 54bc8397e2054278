// Compiled with -mavx2 -mfma (CMakeLists.txt), so nothing here may run before
// avx2_kernels_available() has said yes. The AVX2 twin of packed_gemm.cpp's kernel, over the same
// packed panels of 16 columns: a panel row is two 256-bit registers.
#include <stdexcept>

#include "kernels/packed_gemm.h"

#if NMT_AVX2_KERNELS
#include <immintrin.h>
#endif

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

namespace {

constexpr int kHalf = 8;  // floats per 256-bit register: a panel row is two

// The lanes of an 8-float register that hold columns, as maskload/maskstore take them: the first
// `width` (0..8) lanes set.
__m256i lane_mask(int64_t width) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(width)), lanes);
}

// kRows rows by one panel (16 columns) of c: 2 * kRows accumulators stay in registers over the
// whole depth (6 rows: 12 of the 16 registers); per k, two loads of the weight, kRows broadcasts
// of a, 2 * kRows FMAs. Only the first `width` (1..16) columns are read from init and stored.
template <int kRows>
void block(const float* a, int64_t lda, const float* panel, int64_t depth, const float* init, int64_t init_ld, float* c,
           int64_t ldc, int64_t width) {
  const __m256i masks[2] = {lane_mask(width < kHalf ? width : kHalf), lane_mask(width > kHalf ? width - kHalf : 0)};
  __m256 sum[kRows][2];
#pragma GCC unroll 6
  for (int r = 0; r < kRows; ++r) {
    for (int h = 0; h < 2; ++h) {
      sum[r][h] = init != nullptr ? _mm256_maskload_ps(init + r * init_ld + h * kHalf, masks[h]) : _mm256_setzero_ps();
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    const __m256 low = _mm256_loadu_ps(panel + k * kPanelWidth);
    const __m256 high = _mm256_loadu_ps(panel + k * kPanelWidth + kHalf);
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) {
      const __m256 value = _mm256_broadcast_ss(a + r * lda + k);
      sum[r][0] = _mm256_fmadd_ps(value, low, sum[r][0]);
      sum[r][1] = _mm256_fmadd_ps(value, high, sum[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < kRows; ++r) {
    if (width == kPanelWidth) {
      _mm256_storeu_ps(c + r * ldc, sum[r][0]);
      _mm256_storeu_ps(c + r * ldc + kHalf, sum[r][1]);
    } else {
      _mm256_maskstore_ps(c + r * ldc, masks[0], sum[r][0]);
      _mm256_maskstore_ps(c + r * ldc + kHalf, masks[1], sum[r][1]);
    }
  }
}

using Block = void (*)(const float*, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

constexpr int kBlockRows = 6;

// kBlocks[rows - 1]
constexpr Block kBlocks[kBlockRows] = {block<1>, block<2>, block<3>, block<4>, block<5>, block<6>};

}  // namespace

void pack_weight_avx2(const float* b, int64_t ldb, int64_t depth, int64_t columns, float* packed) {
  const int64_t panels = (columns + kPanelWidth - 1) / kPanelWidth;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t first = p * kPanelWidth;
    const int64_t width = columns - first < kPanelWidth ? columns - first : kPanelWidth;
    const __m256i low = lane_mask(width < kHalf ? width : kHalf);
    const __m256i high = lane_mask(width > kHalf ? width - kHalf : 0);
    for (int64_t k = 0; k < depth; ++k) {  // one row of the panel: 16 floats, zeros past the last column
      float* row = packed + (p * depth + k) * kPanelWidth;
      _mm256_storeu_ps(row, _mm256_maskload_ps(b + k * ldb + first, low));
      _mm256_storeu_ps(row + kHalf, _mm256_maskload_ps(b + k * ldb + first + kHalf, high));
    }
  }
}

void gemm_packed_avx2(const float* a, int64_t lda, const float* packed, int64_t depth, int64_t columns, int64_t rows,
                      int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                      int64_t ldc) {
  if (column_begin < 0 || column_begin % kPanelWidth != 0 || column_end > columns) {
    throw std::invalid_argument("gemm_packed: column range must start on a panel and end within the weight");
  }
  // Columns outside, rows inside: a panel (depth x 16 floats) is reused by every row block.
  for (int64_t column = column_begin; column < column_end; column += kPanelWidth) {
    const int64_t width = column_end - column < kPanelWidth ? column_end - column : kPanelWidth;
    const float* panel = packed + column * depth;
    for (int64_t row = 0; row < rows; row += kBlockRows) {
      const int64_t count = rows - row < kBlockRows ? rows - row : kBlockRows;
      kBlocks[count - 1](a + row * lda, lda, panel, depth, init != nullptr ? init + row * init_ld + column : nullptr,
                         init_ld, c + row * ldc + column, ldc, width);
    }
  }
}

#else  // not x86-64: avx2_kernels_available() says no, and these are never called

void pack_weight_avx2(const float*, int64_t, int64_t, int64_t, float*) {
  throw std::logic_error("pack_weight_avx2: not built");
}
void gemm_packed_avx2(const float*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*,
                      int64_t, float*, int64_t) {
  throw std::logic_error("gemm_packed_avx2: not built");
}

#endif  // NMT_AVX2_KERNELS

}  // namespace nmt::kernels
