// Forced decoding: the log-probabilities a model (or an ensemble) gives to given translations,
// token by token: the numbers the searches add up, so that a translation scored here gets the
// score the search gave it. For reranking n-best lists and filtering corpora (nmt score).
//
// Each batch runs the decoder teacher-forced over its targets (DecoderImpl::forward), and the
// output layer over at most kForcedRows positions at a time: memory grows with the batch and its
// lengths, never with the vocabulary times the batch.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "search/ensemble.h"

namespace nmt {

struct ForcedScore {
  std::vector<double> tokens;  // log p(y_t | y_<t, x) of each target token, EOS last (the ensemble's mean)
  double log_probability = 0;  // their sum
  double score = 0;            // log_probability / lp(|y| + 1), as the searches score (search.h)
};

// Positions of the output layer computed at once.
constexpr int64_t kForcedRows = 4096;

// sources[i]: ids with EOS; targets[i]: ids without EOS. Batches of at most `batch_size` pairs,
// by length; results in input order. alpha: the length penalty (SearchOptions::length_penalty).
std::vector<ForcedScore> force_decode(Ensemble model, const std::vector<std::vector<int64_t>>& sources,
                                      const std::vector<std::vector<int64_t>>& targets, double alpha,
                                      int64_t batch_size, const torch::Device& device);

}  // namespace nmt
