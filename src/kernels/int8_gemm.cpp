// The int8 reference and the packing and quantization every kernel shares (kernels/int8_gemm.h).
#include "kernels/int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace nmt::kernels {

void pack_int8_weight(const int8_t* q, int64_t ldq, int64_t rows, int64_t depth, int8_t* packed) {
  // A shortlist's output layer is packed again whenever its rows change, so whole groups of 4
  // depths move as one 32-bit word; only the last group of a ragged depth goes byte by byte.
  const int64_t groups = int8_depth(depth) / kInt8Group, whole = depth / kInt8Group;
  for (int64_t p = 0; p < int8_panels(rows); ++p) {
    const int64_t first = p * kInt8PanelRows, in_panel = std::min(kInt8PanelRows, rows - first);
    for (int64_t g = 0; g < groups; ++g) {
      int8_t* out = packed + (p * groups + g) * kInt8PanelRows * kInt8Group;
      for (int64_t j = 0; j < in_panel; ++j) {
        const int8_t* from = q + (first + j) * ldq + g * kInt8Group;
        if (g < whole) {
          std::memcpy(out + j * kInt8Group, from, kInt8Group);
        } else {
          for (int64_t i = 0; i < kInt8Group; ++i) out[j * kInt8Group + i] = g * kInt8Group + i < depth ? from[i] : 0;
        }
      }
      std::memset(out + in_panel * kInt8Group, 0, (kInt8PanelRows - in_panel) * kInt8Group);
    }
  }
}

void quantize_int8_rows(const float* x, int64_t ldx, int64_t m, int64_t depth, int32_t limit, int8_t* a,
                        float* row_scale) {
  const int64_t padded = int8_depth(depth);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * ldx;
    float largest = 0;
    for (int64_t k = 0; k < depth; ++k) largest = std::max(largest, std::fabs(row[k]));
    const float bound = static_cast<float>(limit);
    const float scale = largest > 0 ? largest / bound : 1.0f;
    const float inverse = 1.0f / scale;
    int8_t* out = a + i * padded;
    for (int64_t k = 0; k < depth; ++k) {
      out[k] = static_cast<int8_t>(std::clamp(std::nearbyint(row[k] * inverse), -bound, bound));
    }
    std::fill(out + depth, out + padded, int8_t{0});
    row_scale[i] = scale;
  }
}

void int8_gemm_reference(const Int8Product& product, int64_t column_begin, int64_t column_end) {
  const int64_t padded = int8_depth(product.depth), groups = padded / kInt8Group;
  for (int64_t i = 0; i < product.m; ++i) {
    const int8_t* a = product.a + i * padded;
    for (int64_t n = column_begin; n < column_end; ++n) {
      const int8_t* panel = product.packed + n / kInt8PanelRows * kInt8PanelRows * padded;
      const int64_t j = n % kInt8PanelRows;
      int32_t dot = 0;
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t k = 0; k < kInt8Group; ++k) {
          dot += int32_t{a[g * kInt8Group + k]} * panel[(g * kInt8PanelRows + j) * kInt8Group + k];
        }
      }
      const float scaled = static_cast<float>(dot) * (product.row_scale[i] * product.scale[n]);
      product.c[i * product.ldc + n] = product.bias ? scaled + product.bias[n] : scaled;
    }
  }
}

}  // namespace nmt::kernels
