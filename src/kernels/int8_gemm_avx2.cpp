// The AVX2 int8 product (kernels/int8_gemm.h): 4 rows by one panel of 16 columns, two 8-lane
// halves, with vpmaddubsw on |a| and q carrying a's sign (each pair of products at most
// 2 * 127 * 127, within int16), then vpmaddwd into int32.
#include <immintrin.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/int8_gemm.h"

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

namespace {

template <int Rows>
void panel_avx2(const Int8Product& product, int64_t first_row, int64_t panel, int64_t column_end) {
  const int64_t padded = int8_depth(product.depth), groups = padded / kInt8Group;
  const int8_t* weights = product.packed + panel * kInt8PanelRows * padded;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sums[Rows][2];
  for (int r = 0; r < Rows; ++r) sums[r][0] = sums[r][1] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; ++g) {
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + g * 64));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + g * 64 + 32));
    for (int r = 0; r < Rows; ++r) {
      int32_t four;
      __builtin_memcpy(&four, product.a + (first_row + r) * padded + g * kInt8Group, sizeof four);
      const __m256i a = _mm256_set1_epi32(four);
      const __m256i magnitude = _mm256_abs_epi8(a);
      sums[r][0] = _mm256_add_epi32(sums[r][0],
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(low, a)), ones));
      sums[r][1] = _mm256_add_epi32(
          sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(high, a)), ones));
    }
  }
  const int64_t column = panel * kInt8PanelRows;
  const int64_t width = std::min<int64_t>(kInt8PanelRows, column_end - column);
  for (int r = 0; r < Rows; ++r) {
    const int64_t row = first_row + r;
    alignas(32) int32_t dots[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(dots), sums[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dots + 8), sums[r][1]);
    float* c = product.c + row * product.ldc + column;
    for (int64_t j = 0; j < width; ++j) {
      const float scaled = static_cast<float>(dots[j]) * (product.row_scale[row] * product.scale[column + j]);
      c[j] = product.bias ? scaled + product.bias[column + j] : scaled;
    }
  }
}

}  // namespace

void int8_gemm_avx2(const Int8Product& product, int64_t column_begin, int64_t column_end) {
  for (int64_t panel = column_begin / kInt8PanelRows; panel * kInt8PanelRows < column_end; ++panel) {
    int64_t row = 0;
    for (; row + 4 <= product.m; row += 4) panel_avx2<4>(product, row, panel, column_end);
    for (; row < product.m; ++row) panel_avx2<1>(product, row, panel, column_end);
  }
}

#else

void int8_gemm_avx2(const Int8Product&, int64_t, int64_t) { throw std::logic_error("int8_gemm_avx2: not built"); }

#endif

}  // namespace nmt::kernels
