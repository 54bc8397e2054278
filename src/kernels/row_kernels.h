// Row-wise kernels for the training loss, written with the CPU's vector instructions.
//
// LibTorch's CPU kernels each make a full pass over their input and write a new tensor; for the
// output layer's [N, V] logits (about 900 x 8000 floats per Multi30k batch) the label-smoothed
// loss took five such passes (log-softmax, then exp, subtract, scatter and scale in backward).
// These kernels do the same work in two passes, in place, with an exponential evaluated eight
// lanes at a time.
//
// Reached only through kernels/dispatch.h, which runs them only where the CPU has AVX2.
#pragma once

#include <cstdint>

#include "kernels/available.h"

namespace nmt::kernels {

// For each row r of z [rows, cols] (row-major, contiguous): replaces the row by its softmax and
// writes log(sum_j exp(z_rj)) to log_sum_exp[r] and sum_j z_rj to row_sum[r]. Stable for any
// finite logits (the row maximum is subtracted first). Relative error of each probability is
// below 1e-6 (a degree-6 polynomial for exp on [-ln2/2, ln2/2]); probabilities smaller than
// exp(-87) flush to 0. Single-threaded: callers split the rows.
void softmax_rows(float* z, int64_t rows, int64_t cols, float* log_sum_exp, float* row_sum);

// Decoding's log-softmax over logits z [rows, cols] (row-major, contiguous), both ways with the same
// arithmetic, so that they give the same bits: lse_r = m_r + log(sum_j e^(z_rj - m_r)) with m_r the
// row maximum (exp as softmax_rows's), and log p_rj = z_rj - lse_r.
// log_softmax_rows writes every log p into out [rows, cols].
void log_softmax_rows(const float* z, int64_t rows, int64_t cols, float* out);
// top_log_softmax_rows writes only the k largest of each row, best first (ties: the lower column
// first), to values [rows, k] and their columns to ids [rows, k], in two read passes and without
// writing the row: the top-k is kept while the maximum is found. Columns in banned[0, banned_count)
// are never chosen but count in the normaliser. Rows with fewer than k choosable finite entries end
// with -inf values and column 0. k <= cols.
void top_log_softmax_rows(const float* z, int64_t rows, int64_t cols, int64_t k, const int64_t* banned,
                          int64_t banned_count, float* values, int64_t* ids);

// Attention's masked softmax over one row z [cols] whose first `length` entries are real and the
// rest padding (a source mask from make_source_mask is such a prefix): the softmax over
// z[0, length), in place, and exactly 0 at the padded entries. length >= 1. The one masked softmax
// of the fused decoder; attention.cpp holds its LibTorch reference.
void prefix_softmax(float* z, int64_t length, int64_t cols);

// The gradient of the label-smoothed cross-entropy with respect to the logits, in place over
// probabilities p [rows, cols] (from softmax_rows): p <- scale * (p - q), where
// q = (1 - epsilon) * onehot(targets[r]) + epsilon / cols.
void smoothed_gradient_rows(float* p, int64_t rows, int64_t cols, const int64_t* targets, float epsilon, float scale);

// Column sums: sums[j] += sum_r x[r, j] over x [rows, cols] (the bias gradient of a linear layer).
void add_column_sums(const float* x, int64_t rows, int64_t cols, float* sums);

}  // namespace nmt::kernels
