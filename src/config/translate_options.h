// Decoding options: one plain struct, checked once (validate) before search starts.
#pragma once

#include <cstdint>

namespace nmt {

struct SearchOptions {
  int beam_size = 5;              // 1 = greedy
  double length_penalty = 1.0;    // GNMT alpha: score / ((5 + |y|) / 6)^alpha; 0 = none
  double max_length_ratio = 2.0;  // output stops at ratio * source length + 10 ...
  int max_length = 250;           // ... and never exceeds this many tokens
  int n_best = 1;                 // hypotheses returned per sentence (<= beam_size)
  bool ban_unk = false;           // never produce <unk>
  bool return_attention = false;  // keep the attention matrix of each returned hypothesis
};

struct BatchingOptions {
  int batch_size = 64;            // sentences per batch, or tokens with batch_in_tokens
  bool batch_in_tokens = false;
};

// Throws std::invalid_argument naming the option.
void validate(const SearchOptions& options);
void validate(const BatchingOptions& options);

}  // namespace nmt
