// The per-row arithmetic of the fused decoder loop's additive attention (fused_cpu/decoder_pass.h) that
// the kernels of src/kernels/ leave to it: a source row's real length, the softmax's backward,
// multi-head attention's softmaxes and contexts, and the coverage terms. Like the kernels, plain
// pointer-and-size functions, each on one batch row at one target position.
//
// Shapes: S source length, A attention size, C encoder state size, N heads.
#pragma once

#include <cstdint>

namespace nmt::fused_decoder {

// The number of real positions of a source mask row [S] (a prefix: make_source_mask).
int64_t real_positions(const bool* mask, int64_t positions);

// The softmax's backward in place: grad <- w * (grad - sum_s w_s grad_s).
void softmax_row_backward(const float* weights, float* grad, int64_t positions);

// Multi-head attention of one row from its energies scores [S, N]: head n's weights
// head_weights[n] [S] = the softmax of scores[:, n] over the `length` real positions, its context
// the weighted sum of its slice of C / N state columns (into context [C]); mean_weights [S] the
// heads' mean (the weights the decoder returns).
void heads_forward(const float* scores, int64_t length, int64_t positions, int64_t heads, const float* states,
                   int64_t state_size, float* head_weights, float* context, float* mean_weights);

// Its backward: from dL/dcontext [C] and dL/dmean_weights [S] (or null), dL/dscores [S, N] into
// grad_scores, and each head's part of dL/dstates added to grad_states [S, C]. grad_weights: [S]
// scratch.
void heads_backward(const float* head_weights, const float* states, const float* grad_context,
                    const float* grad_mean_weights, int64_t positions, int64_t heads, int64_t state_size,
                    float* grad_weights, float* grad_scores, float* grad_states);

// The keys with coverage, K + u cov_t: covered [S, A] from keys [S, A], coverage cov_t [S] and u [A].
void cover_keys(const float* keys, const float* coverage, const float* u, int64_t positions, int64_t key_size,
                float* covered);

// The next position's coverage, cov_{t+1} = cov_t + w_t: next [S] from coverage [S] and weights [S].
void advance_coverage(const float* coverage, const float* weights, int64_t positions, float* next);

// to[i] += from[i] over `count` floats.
void add_row(const float* from, int64_t count, float* to);

// The backward of K + u cov_t. grad_covered [S, A] is dL/d(K + u cov_t) of position t alone: it
// is added to K's gradient grad_keys [S, A], and read for dL/du (added to grad_u [A]) and dL/dcov_t
// (added to carry [S], which holds the part from t + 1 and goes on to t - 1).
void cover_keys_backward(const float* grad_covered, const float* coverage, const float* u, int64_t positions,
                         int64_t key_size, float* grad_keys, float* grad_u, float* carry);

}  // namespace nmt::fused_decoder
