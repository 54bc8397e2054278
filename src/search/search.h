// Greedy and batched beam search. Both talk to the model only through encode(), one decoder
// step and index_select on the batched state (beam reordering), of an Ensemble (search/ensemble.h):
// one model, or several whose log-probabilities are averaged at every step.
//
// Scores: the sum of token log-probabilities divided by the GNMT length penalty
// lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, eq. 14), |Y| counting EOS; alpha = 0 gives the
// plain log-probability. Greedy scores its output the same way, so beam 1 equals greedy exactly.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "config/translate_options.h"
#include "search/constraints.h"
#include "search/ensemble.h"

namespace nmt {

struct Hypothesis {
  std::vector<int64_t> tokens;  // output ids without EOS
  double log_probability = 0;   // sum of token log-probabilities (EOS included when produced)
  double score = 0;             // log_probability / lp(length)
  torch::Tensor attention;      // [steps, S_real] on the CPU, if requested: one row per output
                                // token (and the EOS step), one column per source token + EOS
};

// For each sentence of the batch, up to n_best hypotheses, best first.
using SearchResult = std::vector<std::vector<Hypothesis>>;

// source [B, S], lengths [B] (CPU). The models must be in eval() mode; call under InferenceMode.
// A Seq2Seq converts to an ensemble of one.
//
// prefix [B, P] int64 on source's device (optional): target prefixes, each sentence's padded with
// PAD. A sentence's output starts with its prefix (forced, scored by the model like any token),
// and the search goes on from there. A prefix must be shorter than its sentence's length cap.
//
// constraints (beam search only; optional): each sentence's terminology constraints
// (search/constraints.h), which its output contains; their tokens must fit under its length cap.
// A sentence without any searches as it would without them.
SearchResult greedy_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                           const SearchOptions& options, const torch::Tensor& prefix = {});
SearchResult beam_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                         const SearchOptions& options, const torch::Tensor& prefix = {},
                         const BatchConstraints& constraints = {});
// The greedy search a GPU runs (greedy_search takes it for GPU tensors): the batch keeps its shape
// and the step works in place, as a CUDA graph can replay it. On the CPU it gives the same results
// as greedy_search, more slowly; the tests run it there.
SearchResult greedy_search_fixed_shape(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                                       const SearchOptions& options, const torch::Tensor& prefix = {});
// The beam search a GPU runs (beam_search takes it for GPU tensors): the batch keeps its B * K rows
// and the step works in place, as a CUDA graph can replay it. On the CPU it gives the same results
// as beam_search; the tests run it there.
SearchResult beam_search_fixed_shape(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                                     const SearchOptions& options, const torch::Tensor& prefix = {});
// Sampling: each output token drawn from the ensemble's distribution, tempered and cut to its top k
// or top p as `options` say, for the whole batch at once like greedy search (which top-k 1 equals);
// for back-translation. The draws come from a CPU generator seeded by options.seed and
// options.sampling_stream, so they repeat on any device. A hypothesis's log-probability is the
// model's, as forced decoding (nmt score) gives it, not the tempered one.
SearchResult sample_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                           const SearchOptions& options, const torch::Tensor& prefix = {});
// options.samples() -> sample_search; else beam_size 1 without constraints -> greedy_search, else
// beam_search. Sampling takes no constraints.
SearchResult search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                    const SearchOptions& options, const torch::Tensor& prefix = {},
                    const BatchConstraints& constraints = {});

// The tokens a search may never produce, set to -inf in next-token log-probabilities [R, V]
// (in place; returns them): pad, BOS, and <unk> with ban_unk.
torch::Tensor ban_tokens(torch::Tensor log_probs, const SearchOptions& options);
// ban_tokens, and target prefixes: a row whose prefix [R, P] (PAD after its end; undefined: none)
// reaches past `step` (a scalar int64 tensor, the output position) may take only its prefix's
// token there, with the model's log-probability of it. In place; returns log_probs.
torch::Tensor allowed_tokens(torch::Tensor log_probs, const SearchOptions& options, const torch::Tensor& prefix,
                             const torch::Tensor& step);
// Beam search's expansion, shared by beam_search and beam_search_fixed_shape: the 2K best
// extensions of each block of K rows, from next-token log-probabilities [N*K, V] and the rows'
// running scores [N*K, 1] float64, best first: [2, N, 2K] float64, scores and ids beam k * V + token.
torch::Tensor best_extensions(const torch::Tensor& log_probs, const torch::Tensor& alive_scores, int64_t beam);
// The same from a single model's logits [N*K, V] on the CPU, with ban_tokens's tokens banned: each
// row's log-softmax and its best 2K in one kernel (kernels/row_kernels.h), never writing the
// [N*K, V] log-probabilities; the numbers of log_softmax_rows (ensemble.h). Only where
// fuses_log_softmax says so.
bool fuses_log_softmax(const torch::Device& device);
torch::Tensor best_extensions_of_logits(const torch::Tensor& logits, const torch::Tensor& alive_scores, int64_t beam,
                                        const SearchOptions& options);
// The GNMT length penalty lp(length).
double length_penalty(int64_t length, double alpha);
// Output length cap for a source of `source_length` tokens.
int64_t max_output_length(int64_t source_length, const SearchOptions& options);
// The cap of each sentence of a batch, from its source lengths [B].
std::vector<int64_t> max_output_lengths(const torch::Tensor& lengths, const SearchOptions& options);

}  // namespace nmt
