// Eight-lane float arithmetic for the kernels compiled with -mavx2 -mfma (GCC/Clang vector
// extensions: the compiler emits AVX2 and FMA instructions for +, *, comparisons and selects).
// Include only from those files; see available.h for who may call them.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__)
#error "kernels/vector_math.h: compile this file with -mavx2 -mfma (CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <math.h>  // expf, logf, tanhf: library functions, not inline templates (see below)

#include <cstdint>
#include <cstring>

namespace nmt::kernels::vec {

constexpr int64_t kLanes = 8;

// Helpers of our own instead of <algorithm>'s and <cmath>'s inline templates (std::min, std::max,
// std::fill, std::exp(float), ...): in an unoptimised build those are out-of-line functions that
// the linker shares with the rest of the program, and it could keep the copy compiled here, with
// AVX2 instructions, for every caller. These are only ever compiled for AVX2 callers.
inline int64_t lanes_left(int64_t left) { return left < kLanes ? left : kLanes; }  // kLanes but at the tail
inline float larger(float a, float b) { return a < b ? b : a; }
inline void fill_zero(float* to, int64_t count) { std::memset(to, 0, static_cast<size_t>(count) * sizeof(float)); }
using Floats = float __attribute__((vector_size(32)));
using Ints = int32_t __attribute__((vector_size(32)));

inline Floats load(const float* from) {
  Floats value;
  std::memcpy(&value, from, sizeof value);
  return value;
}
inline void store(float* to, Floats value) { std::memcpy(to, &value, sizeof value); }
inline Floats sqrt(Floats value) { return reinterpret_cast<Floats>(_mm256_sqrt_ps(reinterpret_cast<__m256>(value))); }

// The first `count` (at most kLanes) floats; the other lanes of the load are 0.
inline Floats load_first(const float* from, int64_t count) {
  if (count == kLanes) return load(from);
  float lanes[kLanes] = {};
  std::memcpy(lanes, from, static_cast<size_t>(count) * sizeof(float));
  return load(lanes);
}
inline void store_first(float* to, Floats value, int64_t count) {
  if (count == kLanes) return store(to, value);
  float lanes[kLanes];
  store(lanes, value);
  std::memcpy(to, lanes, static_cast<size_t>(count) * sizeof(float));
}
inline Floats splat(float value) { return Floats{} + value; }
inline float lane_sum(Floats value) {
  float sum = 0;
  for (int64_t lane = 0; lane < kLanes; ++lane) sum += value[lane];
  return sum;
}
inline float lane_max(Floats value) {
  float max = value[0];
  for (int64_t lane = 1; lane < kLanes; ++lane) max = larger(max, value[lane]);
  return max;
}

// e^x for x <= 0, in eight lanes. x = n ln2 + r with n an integer and |r| <= ln2/2, so
// e^x = 2^n e^r; e^r is a degree-6 Taylor polynomial (error below 2e-7 relative on that
// interval), 2^n is built in the float's exponent field. Below -87 (e^-87 is near the smallest
// normal float) the result is 0, which next to the row's maximum (e^0) is what it rounds to anyway.
inline Floats exp_nonpositive(Floats input) {
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

// tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|), in eight lanes. Absolute error below 1e-7
// (near 0 the difference 1 - e^-2|x| loses relative, not absolute, precision).
inline Floats tanh(Floats x) {
  const Floats zero = splat(0.0f);
  const Floats magnitude = x < zero ? -x : x;
  const Floats e = exp_nonpositive(-2.0f * magnitude);
  const Floats t = (1.0f - e) / (1.0f + e);
  return x < zero ? -t : t;
}

// sigmoid(x) = 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, so that e^-|x| never
// overflows. Relative error below 1e-6.
inline Floats sigmoid(Floats x) {
  const Floats zero = splat(0.0f);
  const Floats e = exp_nonpositive(x < zero ? x : -x);
  const Floats inverse = 1.0f / (1.0f + e);
  return x < zero ? e * inverse : inverse;
}

}  // namespace nmt::kernels::vec
