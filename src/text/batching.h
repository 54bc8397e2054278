// Token-budget batching with length bucketing, and padding into tensors.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "text/token_corpus.h"

namespace nmt {

// Shapes: B batch, S source length, T target length (+1 for BOS or EOS).
struct Batch {
  torch::Tensor source;          // [B, S] int64: x_1 .. x_m EOS, then kPadId
  torch::Tensor source_lengths;  // [B] int64, kept on the CPU
  torch::Tensor target_input;    // [B, T] BOS y_1 .. y_n, then padding
  torch::Tensor target_output;   // [B, T] y_1 .. y_n EOS, then padding
  int64_t target_tokens = 0;     // real (non-pad) tokens in target_output
  Batch to(const torch::Device& device) const;
};

// The padded lengths of one item of a batch, with its EOS (source) and BOS or EOS (target).
struct PaddedLengths {
  size_t source = 0;
  size_t target = 0;  // 0 for translation, which has no target yet
};

// What a batch's budget counts.
enum class BatchCost {
  kPaddedTokens,  // size x (longest source + longest target): the tokens of the padded batch
  kSentences,     // size
};

// The one batcher, for training, validation and translation: cuts `order` (sorted by length, so
// that neighbours pad little) into consecutive batches, each growing while its cost stays within
// `budget`. A single item over the budget still makes a batch of its own.
std::vector<std::vector<int64_t>> cut_batches(const std::vector<int64_t>& order,
                                              const std::function<PaddedLengths(int64_t)>& lengths, size_t budget,
                                              BatchCost cost);

// Groups pair indices into batches whose padded size, B * ((S + 1) + (T + 1)), stays within
// `batch_tokens`. With `shuffle`, examples are shuffled, sorted by length within windows of
// about 100 batches (so padding stays small), and the batches shuffled; all seeded by `seed`.
// Without it, batches follow sorted length (for validation). Within a batch, examples are in
// order of decreasing target length, so that the rows still going at any target position come
// first (the fused training decoder then skips the rest, fused_cpu/decoder_pass.h).
// `pairs` are the indices in `corpus` to batch (those within the length limit).
std::vector<std::vector<int64_t>> make_batches(const TokenCorpus& corpus, const std::vector<int64_t>& pairs,
                                               int batch_tokens, bool shuffle, uint64_t seed);

// The pairs `indices` of `corpus` as one padded batch.
Batch collate(const TokenCorpus& corpus, const std::vector<int64_t>& indices, bool reverse_target = false);

// Pads id sequences into [B, max length] with kPadId; returns the tensor and the lengths [B].
std::pair<torch::Tensor, torch::Tensor> pad_sequences(const std::vector<const std::vector<int64_t>*>& sequences);

}  // namespace nmt
