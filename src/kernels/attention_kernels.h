// Attention's per-step loops over the source positions, written with the CPU's vector
// instructions: the additive scorer's energies and the context as a weighted sum of the encoder
// states, each with its backward. LibTorch makes several passes over [B, S, A] and [B, S, C]
// tensors for each (an add, a tanh and a product; in backward, tanh_backward, an outer product and
// reductions); these make one. Reached only through kernels/dispatch.h, which runs them only where the CPU has
// AVX2.
//
// All arrays are row-major and contiguous; each function handles `batch` consecutive rows of the
// batch (callers pass pointers to the first row and split rows across threads).
#pragma once

#include <cstdint>

#include "kernels/available.h"

namespace nmt::kernels {

// scores[b, s, n] = sum_{a in head n} v[a] * tanh(keys[b, s, a] + query[b, a]), head n holding
// the A / heads elements [n A / heads, (n + 1) A / heads) (multi-head attention; heads = 1: the
// additive scorer's energy). keys [batch, S, A], query [batch, A], v [A] -> scores
// [batch, S, heads]. When activations is not null, the tanh values are written there
// ([batch, S, A]) for the backward. When mask ([batch, S]) is not null, the positions where it is
// false (padding) are not computed: their scores are 0, and their activations are not written.
void additive_energy(const float* keys, const float* query, const float* v, int64_t batch, int64_t positions,
                     int64_t size, int64_t heads, const bool* mask, float* scores, float* activations);

// The backward of additive_energy for the keys and the query, given the activations it wrote:
// grad_keys[b, s, a] = grad_scores[b, s, head of a] * v[a] * (1 - t[b, s, a]^2), grad_query[b, a] =
// sum_s grad_keys[b, s, a]. (The gradient for v is a product of the activations and grad_scores,
// left to the caller.) With accumulate_keys, grad_keys is added to instead of overwritten (a
// gradient summed over the decoder's steps).
void additive_energy_backward(const float* activations, const float* v, const float* grad_scores, int64_t batch,
                              int64_t positions, int64_t size, int64_t heads, float* grad_keys, float* grad_query,
                              bool accumulate_keys);

// context[b, c] = sum_s weights[b, s] * states[b, s, c].
// weights [batch, S], states [batch, S, C] -> context [batch, C].
void weighted_sum(const float* weights, const float* states, int64_t batch, int64_t positions, int64_t size,
                  float* context);

// Its backward: grad_weights[b, s] = sum_c grad_context[b, c] * states[b, s, c] and
// grad_states[b, s, c] = weights[b, s] * grad_context[b, c] (added to grad_states instead with
// accumulate_states).
void weighted_sum_backward(const float* weights, const float* states, const float* grad_context, int64_t batch,
                           int64_t positions, int64_t size, float* grad_weights, float* grad_states,
                           bool accumulate_states);

// Luong's attentional vector with dropout: activations = tanh(u) and attentional =
// activations * mask, over `count` floats; mask null means no dropout (attentional = activations).
void attentional_vector(const float* u, const float* mask, int64_t count, float* activations, float* attentional);

// Its backward: grad_u = grad_attentional * mask * (1 - activations^2).
void attentional_vector_backward(const float* grad_attentional, const float* activations, const float* mask,
                                 int64_t count, float* grad_u);

}  // namespace nmt::kernels
