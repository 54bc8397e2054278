// Compiled with -mavx512f (CMakeLists.txt), so nothing here may run before
// avx512_kernels_available() has said yes.
#include "kernels/packed_gemm.h"

#include <stdexcept>

#if NMT_AVX512_KERNELS
#include <immintrin.h>
#endif

namespace nmt::kernels {

#if NMT_AVX512_KERNELS

namespace {

// The lanes of a panel that hold columns: the first `width` (1..16).
__mmask16 panel_mask(int64_t width) {
  return static_cast<__mmask16>(width >= kPanelWidth ? 0xFFFF : (1u << width) - 1);
}

constexpr __mmask16 kAllLanes = 0xFFFF;

}  // namespace

void pack_weight_avx512(const float* b, int64_t ldb, int64_t depth, int64_t columns, float* packed) {
  const int64_t panels = (columns + kPanelWidth - 1) / kPanelWidth;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t first = p * kPanelWidth;
    const int64_t width = columns - first < kPanelWidth ? columns - first : kPanelWidth;
    const __mmask16 mask = panel_mask(width);
    for (int64_t k = 0; k < depth; ++k) {  // one row of the panel: 16 floats, zeros past the last column
      _mm512_storeu_ps(packed + (p * depth + k) * kPanelWidth, _mm512_maskz_loadu_ps(mask, b + k * ldb + first));
    }
  }
}

namespace {

// kRows rows by kPanels panels (16 or 32 columns) of c: the accumulators stay in registers over the
// whole depth; per k, kPanels loads of the weight, kRows broadcasts of a, kRows * kPanels FMAs. The
// last panel stores only the columns in `last_mask`.
template <int kRows, int kPanels>
void block(const float* a, int64_t lda, const float* panel, int64_t depth, const float* init, int64_t init_ld, float* c,
           int64_t ldc, __mmask16 last_mask) {
  __m512 sum[kRows][kPanels];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) {
      const __mmask16 mask = p == kPanels - 1 ? last_mask : kAllLanes;
      sum[r][p] =
          init != nullptr ? _mm512_maskz_loadu_ps(mask, init + r * init_ld + p * kPanelWidth) : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    __m512 weight[kPanels];
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) weight[p] = _mm512_loadu_ps(panel + (p * depth + k) * kPanelWidth);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 value = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 2
      for (int p = 0; p < kPanels; ++p) sum[r][p] = _mm512_fmadd_ps(value, weight[p], sum[r][p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) {
      const __mmask16 mask = p == kPanels - 1 ? last_mask : kAllLanes;
      _mm512_mask_storeu_ps(c + r * ldc + p * kPanelWidth, mask, sum[r][p]);
    }
  }
}

using Block = void (*)(const float*, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, __mmask16);

constexpr int kBlockRows = 8;

// blocks[panels - 1][rows - 1]
constexpr Block kBlocks[2][kBlockRows] = {
    {block<1, 1>, block<2, 1>, block<3, 1>, block<4, 1>, block<5, 1>, block<6, 1>, block<7, 1>, block<8, 1>},
    {block<1, 2>, block<2, 2>, block<3, 2>, block<4, 2>, block<5, 2>, block<6, 2>, block<7, 2>, block<8, 2>}};

}  // namespace

void gemm_packed_avx512(const float* a, int64_t lda, const float* packed, int64_t depth, int64_t columns, int64_t rows,
                        int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                        int64_t ldc) {
  if (column_begin < 0 || column_begin % kPanelWidth != 0 || column_end > columns) {
    throw std::invalid_argument("gemm_packed: column range must start on a panel and end within the weight");
  }
  // Columns outside, rows inside: a pair of panels (depth x 32 floats) is reused by every row block.
  for (int64_t column = column_begin; column < column_end; column += 2 * kPanelWidth) {
    const int64_t width = column_end - column < 2 * kPanelWidth ? column_end - column : 2 * kPanelWidth;
    const int panels = width > kPanelWidth ? 2 : 1;
    const int64_t last_width = width - (panels - 1) * kPanelWidth;  // 1..16
    const __mmask16 last_mask = panel_mask(last_width);
    const float* panel = packed + column * depth;  // panel column / 16, depth x 16 floats each
    for (int64_t row = 0; row < rows; row += kBlockRows) {
      const int64_t count = rows - row < kBlockRows ? rows - row : kBlockRows;
      kBlocks[panels - 1][count - 1](a + row * lda, lda, panel, depth,
                                     init != nullptr ? init + row * init_ld + column : nullptr, init_ld,
                                     c + row * ldc + column, ldc, last_mask);
    }
  }
}

#else  // not x86-64: avx512_kernels_available() says no, and these are never called

void pack_weight_avx512(const float*, int64_t, int64_t, int64_t, float*) {
  throw std::logic_error("pack_weight_avx512: not built");
}
void gemm_packed_avx512(const float*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*,
                        int64_t, float*, int64_t) {
  throw std::logic_error("gemm_packed_avx512: not built");
}

#endif  // NMT_AVX512_KERNELS

}  // namespace nmt::kernels
