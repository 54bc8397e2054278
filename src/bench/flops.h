// Floating-point operations of the model, counted from its shapes, for the benchmark's (nmt_bench)
// efficiency figure (achieved FLOP/s divided by the machine's measured matrix-multiply rate).
//
// Counted: every matrix product (2 FLOPs per multiply-add) and the attention's per-position
// products; not counted: element-wise work (gates, tanh, softmax), embedding lookups and the
// optimizer, which are memory-bound and small next to the products. Each attention scorer states
// its own products (ScorerArithmetic, model/scorers/registry.h). Training is counted as three
// forward passes (forward, and the two products per weight of the backward pass).
#pragma once

#include <cstdint>

#include "model/options.h"

namespace nmt {

struct FlopShapes {
  int64_t target_vocab_size = 0;  // V
  double source_length = 0;       // mean source tokens per sentence (EOS included)
  double target_length = 0;       // mean target tokens per sentence (EOS included)
};

struct FlopCount {
  double encoder = 0;       // per source token: bi-GRU layers, plus the attention keys
  double decoder = 0;       // per target token: one decoder step (GRU, attention, combine, output layer)
  double per_sentence = 0;  // once per sentence: the bridge to the decoder's initial state

  // Forward FLOPs per target token of a sentence pair with the given mean lengths.
  double forward_per_target_token(const FlopShapes& shapes) const;
};

FlopCount count_flops(const ModelOptions& options, const FlopShapes& shapes);

// Training FLOPs per target token (forward and backward).
double training_flops_per_target_token(const ModelOptions& options, const FlopShapes& shapes);

}  // namespace nmt
