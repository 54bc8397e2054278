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

// sum_j e^(z_j - max) over a row: one vector pass.
float sum_exp_shifted(const float* z, int64_t cols, float max) {
  const Floats max_lanes = splat(max);
  Floats total8 = splat(0.0f);
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes) total8 += exp_nonpositive(load(z + j) - max_lanes);
  float total = lane_sum(total8);
  for (; j < cols; ++j) total += ::expf(z[j] - max);
  return total;
}

float row_max(const float* z, int64_t cols) {
  Floats max8 = splat(-INFINITY);
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes) {
    const Floats value = load(z + j);
    max8 = value > max8 ? value : max8;
  }
  float max = lane_max(max8);
  for (; j < cols; ++j) max = larger(max, z[j]);
  return max;
}

// The k largest (value, column) pairs offered so far, best first, in caller-owned arrays.
class TopK {
 public:
  TopK(int64_t k, float* values, int64_t* ids) : k_(k), values_(values), ids_(ids) {}
  // Below this, an offer changes nothing.
  float threshold() const { return filled_ == k_ ? values_[k_ - 1] : -INFINITY; }
  void offer(float value, int64_t id) {
    if (!(value > threshold())) return;
    int64_t i = filled_ == k_ ? k_ - 1 : filled_++;
    for (; i > 0 && values_[i - 1] < value; --i) values_[i] = values_[i - 1], ids_[i] = ids_[i - 1];
    values_[i] = value;
    ids_[i] = id;
  }
  void pad() {
    for (; filled_ < k_; ++filled_) values_[filled_] = -INFINITY, ids_[filled_] = 0;
  }

 private:
  int64_t k_, filled_ = 0;
  float* values_;
  int64_t* ids_;
};

void top_log_softmax_row(const float* z, int64_t cols, int64_t k, const int64_t* banned, int64_t banned_count,
                         float* values, int64_t* ids) {
  TopK top(k, values, ids);
  const auto offer = [&](int64_t j) {
    for (int64_t b = 0; b < banned_count; ++b) {
      if (banned[b] == j) return;
    }
    top.offer(z[j], j);
  };
  // Pass 1: the maximum, and the top k; most chunks hold nothing above the k-th best so far.
  Floats max8 = splat(-INFINITY);
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes) {
    const Floats value = load(z + j);
    max8 = value > max8 ? value : max8;
    const Ints above = value > splat(top.threshold());
    if (_mm256_movemask_ps(reinterpret_cast<__m256>(above)) != 0) {
      for (int64_t lane = 0; lane < kLanes; ++lane) offer(j + lane);
    }
  }
  float max = lane_max(max8);
  for (; j < cols; ++j) max = larger(max, z[j]), offer(j);
  top.pad();
  // Pass 2: the normaliser.
  const float log_sum_exp = max + ::logf(sum_exp_shifted(z, cols, max));
  for (int64_t i = 0; i < k; ++i) values[i] -= log_sum_exp;
}

}  // namespace

void log_softmax_rows(const float* z, int64_t rows, int64_t cols, float* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* in = z + row * cols;
    float* to = out + row * cols;
    const float max = row_max(in, cols);
    const float log_sum_exp = max + ::logf(sum_exp_shifted(in, cols, max));
    const Floats shift = splat(log_sum_exp);
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) store(to + j, load(in + j) - shift);
    for (; j < cols; ++j) to[j] = in[j] - log_sum_exp;
  }
}

void top_log_softmax_rows(const float* z, int64_t rows, int64_t cols, int64_t k, const int64_t* banned,
                          int64_t banned_count, float* values, int64_t* ids) {
  for (int64_t row = 0; row < rows; ++row) {
    top_log_softmax_row(z + row * cols, cols, k, banned, banned_count, values + row * k, ids + row * k);
  }
}

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
void log_softmax_rows(const float*, int64_t, int64_t, float*) { throw std::logic_error("log_softmax_rows: not built"); }
void top_log_softmax_rows(const float*, int64_t, int64_t, int64_t, const int64_t*, int64_t, float*, int64_t*) {
  throw std::logic_error("top_log_softmax_rows: not built");
}

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
