// The plain reference of the AMX product (kernels/bf16_kernels.h), generic C++; the kernels
// themselves are bf16_kernels_avx512.cpp.
#include "kernels/bf16_kernels.h"

#include <cstring>

namespace nmt::kernels {
namespace {

// To nearest, ties to even: add 0x7FFF plus the lowest bit kept, then keep the top half (a NaN
// stays a NaN).
float rounded(float value) {
  if (value != value) return value;
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  float result = 0;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

}  // namespace

void bf16_reference(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t depth, int64_t columns,
                    int64_t rows, const float* init, int64_t init_ld, float* c, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < columns; ++j) {
      float sum = 0;
      for (int64_t k = 0; k < depth; ++k) sum += rounded(a[r * lda + k]) * rounded(b[k * ldb + j]);
      c[r * ldc + j] = (init != nullptr ? init[r * init_ld + j] : 0.0f) + sum;
    }
  }
}

}  // namespace nmt::kernels
