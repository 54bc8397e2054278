// Compiled with -mavx2 -mfma (CMakeLists.txt) on x86-64, so nothing here may run before
// row_kernels_available() (in another file, compiled for any x86-64) has said yes.
// GCC/Clang vector extensions: eight floats per value.
#include "kernels/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define NMT_ROW_KERNELS 1
#else
#define NMT_ROW_KERNELS 0
#endif

namespace nmt::kernels {

extern const bool kRowKernelsBuilt = NMT_ROW_KERNELS;  // data, so reading it runs no AVX2 code

#if NMT_ROW_KERNELS

namespace {

constexpr int64_t kLanes = 8;
using Floats = float __attribute__((vector_size(32)));
using Ints = int32_t __attribute__((vector_size(32)));

Floats load(const float* from) {
  Floats value;
  std::memcpy(&value, from, sizeof value);
  return value;
}
void store(float* to, Floats value) { std::memcpy(to, &value, sizeof value); }
Floats splat(float value) { return Floats{} + value; }
float lane_sum(Floats value) {
  float sum = 0;
  for (int64_t lane = 0; lane < kLanes; ++lane) sum += value[lane];
  return sum;
}
float lane_max(Floats value) {
  float max = value[0];
  for (int64_t lane = 1; lane < kLanes; ++lane) max = std::max(max, value[lane]);
  return max;
}

// e^x for x <= 0, in eight lanes. x = n ln2 + r with n an integer and |r| <= ln2/2, so
// e^x = 2^n e^r; e^r is a degree-6 Taylor polynomial (error below 2e-7 relative on that
// interval), 2^n is built in the float's exponent field. Below -87 (e^-87 is near the smallest
// normal float) the result is 0, which next to the row's maximum (e^0) is what it rounds to anyway.
Floats exp_nonpositive(Floats input) {
  const Floats lowest = splat(-87.0f);
  const Floats x = input < lowest ? lowest : input;
  const Floats round = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to the nearest integer
  const Floats n = (x * 1.44269504088896341f + round) - round;
  const Floats r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;  // ln2 in two parts
  Floats p = splat(1.0f / 720);
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Ints exponent = (__builtin_convertvector(n, Ints) + 127) << 23;  // 2^n as float bits
  Floats two_to_n;
  std::memcpy(&two_to_n, &exponent, sizeof two_to_n);
  return input < lowest ? splat(0.0f) : p * two_to_n;
}

void softmax_row(float* z, int64_t cols, float* log_sum_exp, float* row_sum) {
  // Pass 1: maximum and sum.
  Floats max8 = splat(-INFINITY), sum8 = splat(0.0f);
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes) {
    const Floats value = load(z + j);
    max8 = value > max8 ? value : max8;
    sum8 += value;
  }
  float max = lane_max(max8), sum = lane_sum(sum8);
  for (; j < cols; ++j) max = std::max(max, z[j]), sum += z[j];
  // Pass 2: e^(z - max) and its sum; the row is still in cache for the division.
  const Floats max_lanes = splat(max);
  Floats total8 = splat(0.0f);
  for (j = 0; j + kLanes <= cols; j += kLanes) {
    const Floats e = exp_nonpositive(load(z + j) - max_lanes);
    store(z + j, e);
    total8 += e;
  }
  float total = lane_sum(total8);
  for (; j < cols; ++j) {
    z[j] = std::exp(z[j] - max);
    total += z[j];
  }
  const float inverse = 1.0f / total;
  const Floats inverse_lanes = splat(inverse);
  for (j = 0; j + kLanes <= cols; j += kLanes) store(z + j, load(z + j) * inverse_lanes);
  for (; j < cols; ++j) z[j] *= inverse;
  *log_sum_exp = max + std::log(total);
  *row_sum = sum;
}

}  // namespace

void softmax_rows(float* z, int64_t rows, int64_t cols, float* log_sum_exp, float* row_sum) {
  for (int64_t row = 0; row < rows; ++row) softmax_row(z + row * cols, cols, log_sum_exp + row, row_sum + row);
}

void smoothed_gradient_rows(float* p, int64_t rows, int64_t cols, const int64_t* targets, float epsilon, float scale) {
  const Floats scale_lanes = splat(scale);
  const Floats uniform = splat(epsilon / static_cast<float>(cols));
  for (int64_t row = 0; row < rows; ++row) {
    float* values = p + row * cols;
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) store(values + j, (load(values + j) - uniform) * scale_lanes);
    for (; j < cols; ++j) values[j] = (values[j] - epsilon / static_cast<float>(cols)) * scale;
    values[targets[row]] -= (1.0f - epsilon) * scale;
  }
}

#else  // not x86-64: row_kernels_available() says no, and these are never called

void softmax_rows(float*, int64_t, int64_t, float*, float*) { throw std::logic_error("softmax_rows: not built"); }
void smoothed_gradient_rows(float*, int64_t, int64_t, const int64_t*, float, float) {
  throw std::logic_error("smoothed_gradient_rows: not built");
}

#endif

}  // namespace nmt::kernels
