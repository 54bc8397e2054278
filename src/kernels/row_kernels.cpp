// Compiled with -mavx2 -mfma (CMakeLists.txt), so nothing here may run before
// avx2_kernels_available() has said yes.
#include "kernels/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#if NMT_AVX2_KERNELS
#include "kernels/vector_math.h"
#endif

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

namespace {

using namespace vec;

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
  for (; j < cols; ++j) max = larger(max, z[j]), sum += z[j];
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
    z[j] = ::expf(z[j] - max);
    total += z[j];
  }
  const float inverse = 1.0f / total;
  const Floats inverse_lanes = splat(inverse);
  for (j = 0; j + kLanes <= cols; j += kLanes) store(z + j, load(z + j) * inverse_lanes);
  for (; j < cols; ++j) z[j] *= inverse;
  *log_sum_exp = max + ::logf(total);
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

void add_column_sums(const float* x, int64_t rows, int64_t cols, float* sums) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* values = x + row * cols;
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) store(sums + j, load(sums + j) + load(values + j));
    for (; j < cols; ++j) sums[j] += values[j];
  }
}

#else  // not x86-64: avx2_kernels_available() says no, and these are never called

void softmax_rows(float*, int64_t, int64_t, float*, float*) { throw std::logic_error("softmax_rows: not built"); }
void smoothed_gradient_rows(float*, int64_t, int64_t, const int64_t*, float, float) {
  throw std::logic_error("smoothed_gradient_rows: not built");
}
void add_column_sums(const float*, int64_t, int64_t, float*) { throw std::logic_error("add_column_sums: not built"); }

#endif  // NMT_AVX2_KERNELS

// Plain scalar code with the C library's expf: the attention rows are short, and this is the
// exact arithmetic the fused decoder has always trained with.
void prefix_softmax(float* z, int64_t length, int64_t cols) {
  float max = -INFINITY;
  for (int64_t s = 0; s < length; ++s) max = z[s] > max ? z[s] : max;
  float sum = 0;
  for (int64_t s = 0; s < length; ++s) {
    z[s] = std::exp(z[s] - max);
    sum += z[s];
  }
  for (int64_t s = 0; s < length; ++s) z[s] /= sum;
  std::fill(z + length, z + cols, 0.0f);
}

}  // namespace nmt::kernels
