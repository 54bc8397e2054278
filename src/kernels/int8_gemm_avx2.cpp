// The AVX2 int8 product (kernels/int8_gemm.h): 3 rows by one panel of 16 columns, two 8-lane
// halves. vpmaddubsw multiplies the activations shifted to unsigned (a + 32, at most 63) by the
// weights and adds each pair (at most 2 * 63 * 127); two groups' pairs add in int16 (at most
// 32004); vpmaddwd by ones adds those into int32; 32 times each column's weight sum is taken off
// before the scales.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/int8_gemm.h"

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

namespace {

constexpr int32_t kShift = kInt8Avx2Limit + 1;

// `shifted`: the activations plus 32, as unsigned bytes [m, int8_depth(depth)].
template <int Rows>
void panel_avx2(const Int8Product& product, const uint8_t* shifted, int64_t first_row, int64_t panel,
                int64_t column_end) {
  const int64_t padded = int8_depth(product.depth), groups = padded / kInt8Group;
  const int8_t* weights = product.packed + panel * kInt8PanelRows * padded;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sums[Rows][2];
  for (int r = 0; r < Rows; ++r) sums[r][0] = sums[r][1] = _mm256_setzero_si256();
  // Two groups a step: each vpmaddubsw pair is at most 2 * 63 * 127, so two add within int16.
  // An odd last group goes alone (below).
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    const int8_t* at = weights + g * 64;
    const __m256i low0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    const __m256i high0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 32));
    const __m256i low1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 64));
    const __m256i high1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 96));
    for (int r = 0; r < Rows; ++r) {
      int32_t first, second;
      const uint8_t* u = shifted + (first_row + r) * padded + g * kInt8Group;
      __builtin_memcpy(&first, u, sizeof first);
      __builtin_memcpy(&second, u + kInt8Group, sizeof second);
      const __m256i u0 = _mm256_set1_epi32(first), u1 = _mm256_set1_epi32(second);
      const __m256i low = _mm256_add_epi16(_mm256_maddubs_epi16(u0, low0), _mm256_maddubs_epi16(u1, low1));
      const __m256i high = _mm256_add_epi16(_mm256_maddubs_epi16(u0, high0), _mm256_maddubs_epi16(u1, high1));
      sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(low, ones));
      sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(high, ones));
    }
  }
  for (; g < groups; ++g) {
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + g * 64));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + g * 64 + 32));
    for (int r = 0; r < Rows; ++r) {
      int32_t four;
      __builtin_memcpy(&four, shifted + (first_row + r) * padded + g * kInt8Group, sizeof four);
      const __m256i u = _mm256_set1_epi32(four);
      sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(u, low), ones));
      sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(u, high), ones));
    }
  }
  // As the reference: the exact sum as a float, times (row scale times column scale), plus the bias.
  const int64_t column = panel * kInt8PanelRows;
  const int64_t width = std::min<int64_t>(kInt8PanelRows, column_end - column);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[2], correction[2];
  __m256 scale[2], bias[2];
  for (int h = 0; h < 2; ++h) {
    mask[h] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(width - 8 * h)), lane);
    const int64_t at = column + 8 * h;
    correction[h] =
        _mm256_mullo_epi32(_mm256_maskload_epi32(product.column_sums + at, mask[h]), _mm256_set1_epi32(kShift));
    scale[h] = _mm256_maskload_ps(product.scale + at, mask[h]);
    bias[h] = product.bias ? _mm256_maskload_ps(product.bias + at, mask[h]) : _mm256_setzero_ps();
  }
  for (int r = 0; r < Rows; ++r) {
    const int64_t row = first_row + r;
    const __m256 row_scale = _mm256_set1_ps(product.row_scale[row]);
    float* c = product.c + row * product.ldc + column;
    for (int h = 0; h < 2; ++h) {
      const __m256 dots = _mm256_cvtepi32_ps(_mm256_sub_epi32(sums[r][h], correction[h]));
      __m256 out = _mm256_mul_ps(dots, _mm256_mul_ps(row_scale, scale[h]));
      if (product.bias) out = _mm256_add_ps(out, bias[h]);
      _mm256_maskstore_ps(c + 8 * h, mask[h], out);
    }
  }
}

// The activations plus 32 as unsigned bytes [m, int8_depth(depth)], made once per call rather than
// in every panel: the calling thread's buffer, valid until its next call.
const uint8_t* shifted_activations(const Int8Product& product) {
  thread_local std::vector<uint8_t> buffer;
  const int64_t bytes = product.m * int8_depth(product.depth);
  if (static_cast<int64_t>(buffer.size()) < bytes) buffer.resize(static_cast<size_t>(bytes));
  const __m256i shift = _mm256_set1_epi8(kShift);
  int64_t k = 0;
  for (; k + 32 <= bytes; k += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(product.a + k));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(buffer.data() + k), _mm256_add_epi8(a, shift));
  }
  for (; k < bytes; ++k) buffer[static_cast<size_t>(k)] = static_cast<uint8_t>(product.a[k] + kShift);
  return buffer.data();
}

}  // namespace

void quantize_int8_rows_avx2(const float* x, int64_t ldx, int64_t m, int64_t depth, int32_t limit, int8_t* a,
                             float* row_scale) {
  const int64_t padded = int8_depth(depth);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const float bound = static_cast<float>(limit);
  const __m256 low = _mm256_set1_ps(-bound), high = _mm256_set1_ps(bound);
  // packs_epi32 and packs_epi16 interleave 128-bit lanes: this puts the 4-byte groups back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * ldx;
    __m256 largest8 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= depth; k += 8)
      largest8 = _mm256_max_ps(largest8, _mm256_and_ps(_mm256_loadu_ps(row + k), magnitude));
    float lanes[8];
    _mm256_storeu_ps(lanes, largest8);
    float largest = 0;
    for (const float lane : lanes) largest = std::max(largest, lane);
    for (; k < depth; ++k) largest = std::max(largest, std::fabs(row[k]));
    // As quantize_int8_rows: the same scale, product, rounding (to nearest, ties to even) and clamp.
    const float scale = largest > 0 ? largest / bound : 1.0f;
    const float inverse = 1.0f / scale;
    const __m256 inverse8 = _mm256_set1_ps(inverse);
    const auto quantized = [&](int64_t at) {
      const __m256 product = _mm256_mul_ps(_mm256_loadu_ps(row + at), inverse8);
      const __m256 rounded = _mm256_round_ps(product, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(rounded, low), high));
    };
    int8_t* out = a + i * padded;
    for (k = 0; k + 32 <= depth; k += 32) {
      const __m256i words = _mm256_packs_epi16(_mm256_packs_epi32(quantized(k), quantized(k + 8)),
                                               _mm256_packs_epi32(quantized(k + 16), quantized(k + 24)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_permutevar8x32_epi32(words, order));
    }
    for (; k < depth; ++k) {
      out[k] = static_cast<int8_t>(std::clamp(std::nearbyint(row[k] * inverse), -bound, bound));
    }
    std::fill(out + depth, out + padded, int8_t{0});
    row_scale[i] = scale;
  }
}

void int8_gemm_avx2(const Int8Product& product, int64_t column_begin, int64_t column_end) {
  const uint8_t* shifted = shifted_activations(product);
  for (int64_t panel = column_begin / kInt8PanelRows; panel * kInt8PanelRows < column_end; ++panel) {
    // Blocks of 3 rows: 6 sums, 4 weight vectors and the broadcasts fit the 16 registers (with 4
    // rows the sums spill to the stack).
    int64_t row = 0;
    for (; row + 3 <= product.m; row += 3) panel_avx2<3>(product, shifted, row, panel, column_end);
    if (product.m - row == 2) panel_avx2<2>(product, shifted, row, panel, column_end);
    if (product.m - row == 1) panel_avx2<1>(product, shifted, row, panel, column_end);
  }
}

#else

void int8_gemm_avx2(const Int8Product&, int64_t, int64_t) { throw std::logic_error("int8_gemm_avx2: not built"); }
void quantize_int8_rows_avx2(const float*, int64_t, int64_t, int64_t, int32_t, int8_t*, float*) {
  throw std::logic_error("quantize_int8_rows_avx2: not built");
}

#endif

}  // namespace nmt::kernels
