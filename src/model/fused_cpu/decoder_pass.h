// The decoder's teacher-forced training pass (decoder.h) as one autograd function, its forward
// and backward written out step by step over the kernels of src/kernels/. The maths is
// DecoderImpl::advance, per target position t and layer l of L:
//   gi^0_t = G_t + W_f a_{t-1}          G_t: input gates from y_{t-1} (all positions, one product)
//   gi^l_t = W_l dropout(h^{l-1}_t) + b_l                        (l >= 1)
//   h^l_t  = GRU(gi^l_t, W_h^l h^l_{t-1} + b_h^l, h^l_{t-1})
//   w_t, c_t = attention(h_t)           h_t = h^{L-1}_t; the scorer's weights and context
//   a_t  = dropout(tanh(W_c [h_t; c_t]))
// The attention step comes in two kinds:
//   - the additive form (model/attention.h, AdditiveForm), written out with the loop's kernels:
//       w_t = masked softmax(v^T tanh(K + W_q h_t)),  c_t = sum_s w_ts states_s  (K: the keys),
//     with coverage K + u cov_t in place of K, the coverage cov_t = w_0 + .. + w_{t-1} carried
//     forward in the loop and its gradient backward; with N heads (multi-head) each head's
//     energies over its slice of A, its softmax, and its context from its slice of C, w_t the
//     heads' mean;
//   - any other scorer: AttentionImpl::forward itself, run by each thread on its block of rows
//     with autograd recording just that step, whose gradients the backward loop takes block by
//     block (torch::autograd::grad). A scorer's query map W h_t (ScorerImpl::query_weight) is one
//     of the loop's packed products. The scorer's own operators are a few per step; what the fused
//     loop saves (the recurrence, the combine layer, the running sums of the states' and keys'
//     gradients) it saves for every scorer.
//
// Why: the per-step path runs about 130 LibTorch operators and autograd nodes per target position
// (forward and backward) on tensors of about 60 x 256 floats, and autograd adds each step's
// gradient of the encoder states and keys into a running sum ([B, S, C] and [B, S, A] per step).
// Here a position costs 2L + 2 matrix products for L layers (2L + 1 for a scorer without a query
// map; weights packed once per pass, linear/loop_weight.h) and a few kernel passes each way; the states'
// and keys' gradients accumulate in place, and each weight's gradient is one product over all
// positions after the loop (as LoopLinear does for the per-step path).
//
// DecoderImpl::forward uses it whenever autograd records the pass (training) on a CPU with the
// AVX2 kernels, for any number of decoder layers and any scorer; `none` takes the per-step path.
// Dropout masks are drawn in the order the per-step path draws them, so for a seed both paths
// compute the same function; tests compare their values and gradients.
//
// Shapes: B batch, T target positions, S source length, H decoder hidden size, A attention
// size, C encoder state size.
//
// The files, all in model/fused_cpu/: decoder_pass.cpp the autograd function (checks and glue);
// decoder_forward and decoder_backward the two loops, a member function per phase of a position;
// decoder_state the state the forward hands the backward, one typed struct; decoder_loop.h the
// types they share; decoder_rows the additive form's per-row arithmetic; decoder_recorded any other
// scorer's recorded step.
#pragma once

#include <torch/types.h>

#include <vector>

#include "model/attention.h"
#include "model/encoded_source.h"

namespace nmt {

struct FusedDecoderWeights {
  torch::Tensor feed;                      // [3H, H] W_f, input feeding of a_{t-1} into the first layer's gates
  std::vector<torch::Tensor> hidden;       // L x [3H, H] W_h of each layer's cell
  std::vector<torch::Tensor> hidden_bias;  // L x [3H] b_h
  std::vector<torch::Tensor> layer_gates;  // L - 1 x [3H, H] W_l, each upper layer's input gates
  std::vector<torch::Tensor> layer_bias;   // L - 1 x [3H] b_l
  torch::Tensor query;                     // [A, H] W_q of a scorer of the additive form; else undefined
  torch::Tensor energy;                    // [A] v of a scorer of the additive form; else undefined
  torch::Tensor coverage;                  // [A] u of the additive form with coverage; else undefined
  int64_t heads = 1;                       // the additive form's heads (AdditiveForm::heads)
  torch::Tensor combine;                   // [H, H + C] W_c
};

struct FusedDecoderOutput {
  torch::Tensor attentional;  // [B, T, H] a_t; 0 at positions the loop skipped (see target_lengths)
  torch::Tensor attention;    // [B, T, S] w_t, exactly 0 at padded source positions; 0 where skipped
};

// token_gates [B, T, 3H] (G_t above), initial_hidden [L, B, H] (h^l_0), float32 on the CPU; call only
// when kernels::use_kernel(Operation::kDecoderLoop, ...) says yes for them. target_lengths [B] int64: the real
// positions of each row's target. At position t the loop runs only the rows up to the last one still going: with rows
// in order of decreasing length (as make_batches leaves them) exactly the rows still going. The positions it skips are
// target padding, which no loss reads. dropout: the probability for a_t, 0 when not training. `attention`: the
// decoder's, whose forward() runs the attention step when weights.query is undefined.
FusedDecoderOutput fused_decoder_loop(const torch::Tensor& token_gates, const torch::Tensor& initial_hidden,
                                      const EncodedSource& source, const FusedDecoderWeights& weights,
                                      AttentionImpl& attention, const torch::Tensor& target_lengths, double dropout);

}  // namespace nmt
