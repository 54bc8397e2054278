// The AVX-512 VNNI int8 product (kernels/int8_gemm.h): blocks of up to 4 rows by 4 panels (64
// columns), 16 accumulators of 16 int32 lanes; vpdpbusd multiplies the activations shifted to
// unsigned (a + 128, the sign bit flipped) by the weights' bytes, and 128 times each column's
// weight sum is taken off before the scales.
#include <immintrin.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/int8_gemm.h"

namespace nmt::kernels {

#if NMT_VNNI_KERNELS

namespace {

template <int Rows, int Panels>
void block_vnni(const Int8Product& product, int64_t first_row, int64_t first_panel, int64_t column_end) {
  const int64_t padded = int8_depth(product.depth), groups = padded / kInt8Group;
  const int64_t panel_bytes = kInt8PanelRows * padded;
  const int8_t* weights = product.packed + first_panel * panel_bytes;
  __m512i sums[Rows][Panels];
  for (int r = 0; r < Rows; ++r) {
    for (int p = 0; p < Panels; ++p) sums[r][p] = _mm512_setzero_si512();
  }
  const __m512i flip = _mm512_set1_epi32(static_cast<int32_t>(0x80808080u));
  for (int64_t g = 0; g < groups; ++g) {
    __m512i w[Panels];
    for (int p = 0; p < Panels; ++p) w[p] = _mm512_loadu_si512(weights + p * panel_bytes + g * 64);
    for (int r = 0; r < Rows; ++r) {
      int32_t four;
      __builtin_memcpy(&four, product.a + (first_row + r) * padded + g * kInt8Group, sizeof four);
      const __m512i u = _mm512_xor_si512(_mm512_set1_epi32(four), flip);
      for (int p = 0; p < Panels; ++p) sums[r][p] = _mm512_dpbusd_epi32(sums[r][p], u, w[p]);
    }
  }
  for (int p = 0; p < Panels; ++p) {
    const int64_t column = (first_panel + p) * kInt8PanelRows;
    const int64_t width = std::min<int64_t>(kInt8PanelRows, column_end - column);
    const __mmask16 mask = static_cast<__mmask16>((1u << width) - 1);
    const __m512i shift = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(mask, product.column_sums + column), 7);
    const __m512 scale = _mm512_maskz_loadu_ps(mask, product.scale + column);
    const __m512 bias = product.bias ? _mm512_maskz_loadu_ps(mask, product.bias + column) : _mm512_setzero_ps();
    for (int r = 0; r < Rows; ++r) {
      const int64_t row = first_row + r;
      const __m512 dots = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums[r][p], shift));
      __m512 out = _mm512_mul_ps(dots, _mm512_mul_ps(_mm512_set1_ps(product.row_scale[row]), scale));
      if (product.bias) out = _mm512_add_ps(out, bias);
      _mm512_mask_storeu_ps(product.c + row * product.ldc + column, mask, out);
    }
  }
}

template <int Rows>
void rows_vnni(const Int8Product& product, int64_t first_row, int64_t panel_begin, int64_t panel_end,
               int64_t column_end) {
  int64_t panel = panel_begin;
  for (; panel + 4 <= panel_end; panel += 4) block_vnni<Rows, 4>(product, first_row, panel, column_end);
  for (; panel < panel_end; ++panel) block_vnni<Rows, 1>(product, first_row, panel, column_end);
}

}  // namespace

void int8_gemm_vnni(const Int8Product& product, int64_t column_begin, int64_t column_end) {
  const int64_t panel_begin = column_begin / kInt8PanelRows;
  const int64_t panel_end = (column_end + kInt8PanelRows - 1) / kInt8PanelRows;
  int64_t row = 0;
  for (; row + 4 <= product.m; row += 4) rows_vnni<4>(product, row, panel_begin, panel_end, column_end);
  for (; row < product.m; ++row) rows_vnni<1>(product, row, panel_begin, panel_end, column_end);
}

#else

void int8_gemm_vnni(const Int8Product&, int64_t, int64_t) { throw std::logic_error("int8_gemm_vnni: not built"); }

#endif

}  // namespace nmt::kernels
