// Compiled with -mavx2 -mfma (CMakeLists.txt), so nothing here may run before
// avx2_kernels_available() has said yes.
#include "kernels/gru_kernels.h"

#include <stdexcept>

#if NMT_AVX2_KERNELS
#include "kernels/vector_math.h"
#endif

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

using namespace vec;

void gru_step(const float* input_gates, const float* hidden_gates, const float* hidden, int64_t batch, int64_t size,
              float* next_hidden, float* saved) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* gi = input_gates + b * 3 * size;
    const float* gh = hidden_gates + b * 3 * size;
    const float* h = hidden + b * size;
    float* out = next_hidden + b * size;
    float* keep = saved != nullptr ? saved + b * 4 * size : nullptr;
    for (int64_t j = 0; j < size; j += kLanes) {
      const int64_t count = lanes_left(size - j);
      const Floats r = vec::sigmoid(load_first(gi + j, count) + load_first(gh + j, count));
      const Floats z = vec::sigmoid(load_first(gi + size + j, count) + load_first(gh + size + j, count));
      const Floats hidden_n = load_first(gh + 2 * size + j, count);
      const Floats n = vec::tanh(load_first(gi + 2 * size + j, count) + r * hidden_n);
      store_first(out + j, n + z * (load_first(h + j, count) - n), count);
      if (keep == nullptr) continue;
      store_first(keep + j, r, count);
      store_first(keep + size + j, z, count);
      store_first(keep + 2 * size + j, n, count);
      store_first(keep + 3 * size + j, hidden_n, count);
    }
  }
}

void gru_step_backward(const float* grad_next, const float* saved, const float* hidden, int64_t batch, int64_t size,
                       float* grad_input_gates, float* grad_hidden_gates, float* grad_hidden) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* grad = grad_next + b * size;
    const float* keep = saved + b * 4 * size;
    const float* h = hidden + b * size;
    float* dgi = grad_input_gates + b * 3 * size;
    float* dgh = grad_hidden_gates + b * 3 * size;
    float* dh = grad_hidden + b * size;
    for (int64_t j = 0; j < size; j += kLanes) {
      const int64_t count = lanes_left(size - j);
      const Floats g = load_first(grad + j, count);
      const Floats r = load_first(keep + j, count), z = load_first(keep + size + j, count);
      const Floats n = load_first(keep + 2 * size + j, count), hidden_n = load_first(keep + 3 * size + j, count);
      const Floats d_n = g * (1.0f - z) * (1.0f - n * n);  // through h' = n + z (h - n), then tanh
      const Floats d_z = g * (load_first(h + j, count) - n) * z * (1.0f - z);
      const Floats d_r = d_n * hidden_n * r * (1.0f - r);
      store_first(dgi + j, d_r, count);
      store_first(dgi + size + j, d_z, count);
      store_first(dgi + 2 * size + j, d_n, count);
      store_first(dgh + j, d_r, count);
      store_first(dgh + size + j, d_z, count);
      store_first(dgh + 2 * size + j, d_n * r, count);
      store_first(dh + j, g * z, count);
    }
  }
}

#else  // not x86-64: avx2_kernels_available() says no, and these are never called

void gru_step(const float*, const float*, const float*, int64_t, int64_t, float*, float*) {
  throw std::logic_error("gru_step: not built");
}
void gru_step_backward(const float*, const float*, const float*, int64_t, int64_t, float*, float*, float*) {
  throw std::logic_error("gru_step_backward: not built");
}

#endif  // NMT_AVX2_KERNELS

}  // namespace nmt::kernels
