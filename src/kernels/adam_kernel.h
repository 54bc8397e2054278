// Adam's update of one parameter tensor in one pass with the CPU's vector instructions, where
// LibTorch's Adam makes eight passes (two of them into new tensors). Reached only through
// kernels/dispatch.h, which runs it only where the CPU has AVX2.
#pragma once

#include <cstdint>

#include "kernels/available.h"

namespace nmt::kernels {

// For i in [0, count), with g = grad[i]:
//   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,
//   param -= step_size * m / (sqrt(v) * inverse_sqrt_correction2 + epsilon)
// which is torch::optim::Adam's step without weight decay and amsgrad (step_size = lr / (1 -
// beta1^t), inverse_sqrt_correction2 = 1 / sqrt(1 - beta2^t)). 1 - beta is passed in, computed in
// double as Adam does: 1 - 0.999f in float is 1.3e-5 off.
void adam_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t count, float beta1,
                 float beta2, float one_minus_beta1, float one_minus_beta2, float step_size,
                 float inverse_sqrt_correction2, float epsilon);

}  // namespace nmt::kernels
