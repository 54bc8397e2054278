// Compiled with -mavx2 -mfma (CMakeLists.txt), so nothing here may run before
// avx2_kernels_available() has said yes.
#include "kernels/adam_kernel.h"

#include <stdexcept>

#if NMT_AVX2_KERNELS
#include "kernels/vector_math.h"
#endif

namespace nmt::kernels {

#if NMT_AVX2_KERNELS

using namespace vec;

void adam_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t count, float beta1,
                 float beta2, float one_minus_beta1, float one_minus_beta2, float step_size,
                 float inverse_sqrt_correction2, float epsilon) {
  for (int64_t i = 0; i < count; i += kLanes) {
    const int64_t lanes = lanes_left(count - i);
    const Floats g = load_first(grad + i, lanes);
    const Floats m = beta1 * load_first(exp_avg + i, lanes) + one_minus_beta1 * g;
    const Floats v = beta2 * load_first(exp_avg_sq + i, lanes) + one_minus_beta2 * g * g;
    const Floats update = step_size * m / (vec::sqrt(v) * inverse_sqrt_correction2 + epsilon);
    store_first(exp_avg + i, m, lanes);
    store_first(exp_avg_sq + i, v, lanes);
    store_first(param + i, load_first(param + i, lanes) - update, lanes);
  }
}

#else  // not x86-64: avx2_kernels_available() says no, and this is never called

void adam_update(float*, const float*, float*, float*, int64_t, float, float, float, float, float, float, float) {
  throw std::logic_error("adam_update: not built");
}

#endif  // NMT_AVX2_KERNELS

}  // namespace nmt::kernels
