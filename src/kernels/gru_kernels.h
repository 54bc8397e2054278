// The element-wise part of a GRU step (model/gru_cell.h), forward and backward, each as one pass
// with the CPU's vector instructions. LibTorch runs the same step as about ten kernels forward
// and fifteen backward, each a pass over [B, H] or [B, 3H] with its own dispatch and autograd
// node; at a batch of 60 rows that overhead, not arithmetic, was most of a step's element-wise
// time. Reached only through kernels/dispatch.h, which runs them only where the CPU has AVX2.
//
// Gate order (r, z, n) as torch::nn::GRU; gi = W_i x + b_i and gh = W_h h + b_h, each [B, 3H].
// All arrays row-major and contiguous; `batch` rows from the pointers given.
#pragma once

#include <cstdint>

#include "kernels/available.h"

namespace nmt::kernels {

// r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n),
// h' = (1 - z) * n + z * h. Writes h' [batch, H], and to saved [batch, 4H] the row (r, z, n, gh_n)
// that the backward needs (unless saved is null: inference). next_hidden may be hidden itself.
void gru_step(const float* input_gates, const float* hidden_gates, const float* hidden, int64_t batch, int64_t size,
              float* next_hidden, float* saved);

// The backward of gru_step: from dL/dh' [batch, H], the saved rows and h, writes dL/dgi and
// dL/dgh [batch, 3H] and dL/dh [batch, H] (the direct path through z * h only; the path through
// gh is the caller's product dL/dgh W_h).
void gru_step_backward(const float* grad_next, const float* saved, const float* hidden, int64_t batch, int64_t size,
                       float* grad_input_gates, float* grad_hidden_gates, float* grad_hidden);

}  // namespace nmt::kernels
