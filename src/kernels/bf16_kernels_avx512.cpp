// Compiled with -mamx-tile -mamx-bf16 -mavx512bf16 -mavx512f -mavx512bw -mavx512vl (CMakeLists.txt):
// the conversions and the packing run only after bf16_kernels_available() has said yes, the tile
// product only after amx_kernels_available(), the vdpbf16ps one after
// avx512_bf16_kernels_available(). No standard containers or algorithms here: their
// code, compiled with these flags, could be the copy the linker keeps for the whole program.
#include "kernels/bf16_kernels.h"

#include <cstring>
#include <stdexcept>

#if NMT_BF16_KERNELS
#include <immintrin.h>
#endif

namespace nmt::kernels {

#if NMT_BF16_KERNELS

namespace {

// ldtilecfg's 64 bytes: palette 1, and each of the 8 tiles 16 rows of 64 bytes (16 floats, or 32
// bfloat16: 16 pairs of a row of a, a pair of depths for 16 columns of the weight).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

constexpr int64_t kTileRows = 16;

// bfloat16 bits of 16 floats, each in the low half of its 32-bit lane: to nearest, ties to even
// (add 0x7FFF plus the lowest bit kept, then keep the top half); a NaN becomes 0xFFFF, as in
// LibTorch's vectorized conversion.
__m512i round_lanes(__m512 values) {
  const __m512i bits = _mm512_castps_si512(values);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lowest_kept)), 16);
  return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(values, values, _CMP_UNORD_Q), rounded, _mm512_set1_epi32(0xFFFF));
}

__mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << count) - 1);
}

// A thread's buffer for its rounded rows of a, grown as needed.
struct RoundedRows {
  uint16_t* values = nullptr;
  int64_t size = 0;
  ~RoundedRows() { delete[] values; }
};

// Rows [0, rows) of a as bfloat16 in `out`, padded with zeros to 16-row tiles and the packed depth.
const uint16_t* round_rows(const float* a, int64_t lda, int64_t rows, int64_t depth, int64_t padded_depth,
                           RoundedRows& out) {
  const int64_t size = (rows + kTileRows - 1) / kTileRows * kTileRows * padded_depth;
  if (out.size < size) {
    delete[] out.values;
    out.values = new uint16_t[size];
    out.size = size;
  }
  std::memset(out.values, 0, static_cast<size_t>(size) * sizeof(uint16_t));
  for (int64_t r = 0; r < rows; ++r) round_to_bf16(a + r * lda, out.values + r * padded_depth, depth);
  return out.values;
}

// What both products do first: check the column range, then round a's rows into this thread's
// buffer (round_rows); null when there is nothing to multiply.
const uint16_t* checked_rounded_rows(const float* a, int64_t lda, int64_t depth, int64_t columns, int64_t rows,
                                     int64_t column_begin, int64_t column_end) {
  if (column_begin < 0 || column_begin % kBf16Panel != 0 || column_end > columns) {
    throw std::invalid_argument("gemm_bf16: column range must start on a panel and end within the weight");
  }
  if (rows <= 0 || column_begin >= column_end) return nullptr;
  thread_local RoundedRows buffer;
  return round_rows(a, lda, rows, depth, padded_bf16_depth(depth), buffer);
}

// c's rows [0, rows) and columns [0, width) of the tile sums in `sums` (16 x 16 floats), plus init.
void store_tile(const float* sums, int64_t rows, int64_t width, const float* init, int64_t init_ld, float* c,
                int64_t ldc) {
  const __mmask16 mask = first_lanes(width);
  for (int64_t r = 0; r < rows; ++r) {
    __m512 value = _mm512_loadu_ps(sums + r * kBf16Panel);
    if (init != nullptr) value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(mask, init + r * init_ld));
    _mm512_mask_storeu_ps(c + r * ldc, mask, value);
  }
}

// kRows rows by kPanels panels (16 or 32 columns) of c, as gemm_packed_avx512's blocks
// (packed_gemm.cpp) but over pairs of depths: per pair, kPanels loads of the weight (each lane a
// column's two bfloat16), kRows broadcasts of a row's two, kRows * kPanels vdpbf16ps. `a` holds
// rounded rows of the padded depth; the last panel stores only the columns in `last_mask`.
template <int kRows, int kPanels>
void dot_block(const uint16_t* a, const uint16_t* panel, int64_t padded_depth, const float* init, int64_t init_ld,
               float* c, int64_t ldc, __mmask16 last_mask) {
  const int64_t panel_values = padded_depth * kBf16Panel;
  __m512 sum[kRows][kPanels];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) {
      const __mmask16 mask = p == kPanels - 1 ? last_mask : __mmask16{0xFFFF};
      sum[r][p] =
          init != nullptr ? _mm512_maskz_loadu_ps(mask, init + r * init_ld + p * kBf16Panel) : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < padded_depth; k += 2) {
    __m512bh weight[kPanels];
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) {
      weight[p] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + p * panel_values + k * kBf16Panel));
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      int32_t pair = 0;
      std::memcpy(&pair, a + r * padded_depth + k, sizeof pair);
      const __m512bh value = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
#pragma GCC unroll 2
      for (int p = 0; p < kPanels; ++p) sum[r][p] = _mm512_dpbf16_ps(sum[r][p], value, weight[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) {
      const __mmask16 mask = p == kPanels - 1 ? last_mask : __mmask16{0xFFFF};
      _mm512_mask_storeu_ps(c + r * ldc + p * kBf16Panel, mask, sum[r][p]);
    }
  }
}

using DotBlock = void (*)(const uint16_t*, const uint16_t*, int64_t, const float*, int64_t, float*, int64_t, __mmask16);

constexpr int kDotRows = 8;

// kDotBlocks[panels - 1][rows - 1]
constexpr DotBlock kDotBlocks[2][kDotRows] = {{dot_block<1, 1>, dot_block<2, 1>, dot_block<3, 1>, dot_block<4, 1>,
                                               dot_block<5, 1>, dot_block<6, 1>, dot_block<7, 1>, dot_block<8, 1>},
                                              {dot_block<1, 2>, dot_block<2, 2>, dot_block<3, 2>, dot_block<4, 2>,
                                               dot_block<5, 2>, dot_block<6, 2>, dot_block<7, 2>, dot_block<8, 2>}};

}  // namespace

void round_to_bf16(const float* in, uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 mask = first_lanes(count - i);
    _mm256_mask_storeu_epi16(out + i, mask, _mm512_cvtepi32_epi16(round_lanes(_mm512_maskz_loadu_ps(mask, in + i))));
  }
}

void widen_bf16(const uint16_t* in, const float* add, float* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 mask = first_lanes(count - i);
    __m512 value =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, in + i)), 16));
    if (add != nullptr) value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(mask, add + i));
    _mm512_mask_storeu_ps(out + i, mask, value);
  }
}

void pack_weight_bf16(const float* b, int64_t ldb, int64_t depth, int64_t columns, uint16_t* packed) {
  const int64_t padded_depth = padded_bf16_depth(depth);
  const int64_t panels = (columns + kBf16Panel - 1) / kBf16Panel;
  for (int64_t p = 0; p < panels; ++p) {
    const __mmask16 mask = first_lanes(columns - p * kBf16Panel);
    const float* panel_columns = b + p * kBf16Panel;
    uint16_t* panel = packed + p * padded_depth * kBf16Panel;
    // A pair of rows k, k + 1 makes 16 lanes of 32 bits: row k's bfloat16 low, row k + 1's high.
    for (int64_t k = 0; k < padded_depth; k += 2) {
      const __m512 even = k < depth ? _mm512_maskz_loadu_ps(mask, panel_columns + k * ldb) : _mm512_setzero_ps();
      const __m512 odd =
          k + 1 < depth ? _mm512_maskz_loadu_ps(mask, panel_columns + (k + 1) * ldb) : _mm512_setzero_ps();
      const __m512i pairs = _mm512_or_si512(round_lanes(even), _mm512_slli_epi32(round_lanes(odd), 16));
      _mm512_storeu_si512(panel + k * kBf16Panel, pairs);
    }
  }
}

void gemm_bf16_amx(const float* a, int64_t lda, const uint16_t* packed, int64_t depth, int64_t columns, int64_t rows,
                   int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                   int64_t ldc) {
  const uint16_t* rounded = checked_rounded_rows(a, lda, depth, columns, rows, column_begin, column_end);
  if (rounded == nullptr) return;
  const int64_t padded_depth = padded_bf16_depth(depth);
  static const TileConfig config;
  _tile_loadconfig(&config);
  alignas(64) float sums[4][kTileRows * kBf16Panel];
  const int64_t a_stride = padded_depth * 2, panel_values = padded_depth * kBf16Panel;
  // Tiles 0-3 hold the sums of two row tiles by two panels, 4-5 the row tiles of a, 6-7 the panels.
  for (int64_t column = column_begin; column < column_end; column += 2 * kBf16Panel) {
    const bool two_panels = column_end - column > kBf16Panel;
    const uint16_t* panel = packed + column / kBf16Panel * panel_values;
    for (int64_t row = 0; row < rows; row += 2 * kTileRows) {
      const bool two_row_tiles = rows - row > kTileRows;
      const uint16_t* first = rounded + row * padded_depth;
      const uint16_t* second = first + kTileRows * padded_depth;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t k = 0; k < padded_depth; k += kBf16Depth) {
        _tile_loadd(4, first + k, a_stride);
        _tile_loadd(6, panel + k * kBf16Panel, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (two_panels) {
          _tile_loadd(7, panel + panel_values + k * kBf16Panel, 64);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (two_row_tiles) {
          _tile_loadd(5, second + k, a_stride);
          _tile_dpbf16ps(2, 5, 6);
          if (two_panels) _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, sums[0], 64);
      if (two_panels) _tile_stored(1, sums[1], 64);
      if (two_row_tiles) _tile_stored(2, sums[2], 64);
      if (two_panels && two_row_tiles) _tile_stored(3, sums[3], 64);
      for (int tile = 0; tile < 4; ++tile) {
        const int64_t tile_row = row + (tile / 2) * kTileRows, tile_column = column + (tile % 2) * kBf16Panel;
        if (tile_row >= rows || tile_column >= column_end) continue;
        const float* tile_init = init != nullptr ? init + tile_row * init_ld + tile_column : nullptr;
        const int64_t tile_rows = rows - tile_row < kTileRows ? rows - tile_row : kTileRows;
        const int64_t tile_width = column_end - tile_column < kBf16Panel ? column_end - tile_column : kBf16Panel;
        store_tile(sums[tile], tile_rows, tile_width, tile_init, init_ld, c + tile_row * ldc + tile_column, ldc);
      }
    }
  }
  _tile_release();
}

void gemm_bf16_avx512(const float* a, int64_t lda, const uint16_t* packed, int64_t depth, int64_t columns, int64_t rows,
                      int64_t column_begin, int64_t column_end, const float* init, int64_t init_ld, float* c,
                      int64_t ldc) {
  const uint16_t* rounded = checked_rounded_rows(a, lda, depth, columns, rows, column_begin, column_end);
  if (rounded == nullptr) return;
  const int64_t padded_depth = padded_bf16_depth(depth);
  // Columns outside, rows inside: a pair of panels is reused by every block of rows.
  for (int64_t column = column_begin; column < column_end; column += 2 * kBf16Panel) {
    const int64_t width = column_end - column < 2 * kBf16Panel ? column_end - column : 2 * kBf16Panel;
    const int panels = width > kBf16Panel ? 2 : 1;
    const __mmask16 last_mask = first_lanes(width - (panels - 1) * kBf16Panel);
    const uint16_t* panel = packed + column / kBf16Panel * padded_depth * kBf16Panel;
    for (int64_t row = 0; row < rows; row += kDotRows) {
      const int64_t count = rows - row < kDotRows ? rows - row : kDotRows;
      kDotBlocks[panels - 1][count - 1](rounded + row * padded_depth, panel, padded_depth,
                                        init != nullptr ? init + row * init_ld + column : nullptr, init_ld,
                                        c + row * ldc + column, ldc, last_mask);
    }
  }
}

#else  // not x86-64: bf16_kernels_available() says no, and these are never called

void round_to_bf16(const float*, uint16_t*, int64_t) { throw std::logic_error("round_to_bf16: not built"); }
void widen_bf16(const uint16_t*, const float*, float*, int64_t) { throw std::logic_error("widen_bf16: not built"); }

void pack_weight_bf16(const float*, int64_t, int64_t, int64_t, uint16_t*) {
  throw std::logic_error("pack_weight_bf16: not built");
}

void gemm_bf16_amx(const float*, int64_t, const uint16_t*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*,
                   int64_t, float*, int64_t) {
  throw std::logic_error("gemm_bf16_amx: not built");
}
void gemm_bf16_avx512(const float*, int64_t, const uint16_t*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*,
                      int64_t, float*, int64_t) {
  throw std::logic_error("gemm_bf16_avx512: not built");
}

#endif  // NMT_BF16_KERNELS

}  // namespace nmt::kernels
