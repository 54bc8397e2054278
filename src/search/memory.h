// How much memory a search holds at once, and the cut of a batch that keeps it within a bound.
//
// Beam search runs B sentences x K beams as B * K decoder rows. Each row holds a copy of its
// sentence's encoder output ([S, 2H_e] states and [S, K_a] scorer keys per member), the step's
// vocabulary-wide scores ([V] logits and log-probabilities per member, and their mean), its
// 2K candidates, and its histories up to the length cap (tokens, and the attention [T, S] when it
// is returned). So memory grows with beam x batch x (vocabulary + source length x model width +
// length cap); translate, evaluate, serve and the benchmark all cut their batches with
// split_for_memory, so that no batch of beams holds more than --max-search-memory.
#pragma once

#include <cstdint>
#include <vector>

#include "config/translate_options.h"
#include "search/ensemble.h"

namespace nmt {

// The largest beam that can be filled with distinct hypotheses: the tokens a search may produce
// (the target vocabulary less pad, BOS, and <unk> with ban_unk).
int64_t largest_beam(int64_t target_vocab_size, const SearchOptions& options);

// Throws std::invalid_argument naming --beam-size when it exceeds largest_beam.
void check_beam_fits_vocabulary(int64_t target_vocab_size, const SearchOptions& options);

// An upper estimate of the bytes one decoder row holds while a source of `source_length` tokens
// (EOS included) is searched.
int64_t search_bytes_per_row(const Ensemble& model, int64_t source_length, int64_t target_vocab_size,
                             const SearchOptions& options);

// The bytes one sentence's search (all its beams) holds: beam_size rows.
int64_t sentence_search_bytes(const Ensemble& model, int64_t source_length, int64_t target_vocab_size,
                              const SearchOptions& options);

// Cuts `batch` (sentence indices, longest source first; `source_lengths[index]` is each one's
// length with EOS) into consecutive pieces whose search holds at most `max_bytes`. Throws
// std::invalid_argument naming the options when a single sentence does not fit.
std::vector<std::vector<int64_t>> split_for_memory(const std::vector<int64_t>& batch,
                                                   const std::vector<int64_t>& source_lengths, const Ensemble& model,
                                                   int64_t target_vocab_size, const SearchOptions& options,
                                                   int64_t max_bytes);

}  // namespace nmt
