// Parallel pairs as token ids, in shards: what training batches are cut from and collated from.
//
// A shard holds up to kShardPairs pairs. Its bytes (little-endian, each part 8-byte aligned):
//   uint64 pairs n | uint32 source offsets [n + 1] | uint32 target offsets [n + 1]
//   | source ids | target ids
// where pair i of the shard has the ids [offsets[i], offsets[i + 1]) of each side, without
// BOS/EOS, each id in the narrowest unsigned type the vocabulary fits (token_width bytes). The same
// bytes live in a memory-mapped prepared file (prepared_corpus.h) or in memory (encode_pairs), so
// batching reads both alike, and the memory of a mapped corpus does not grow with its size beyond
// the pages in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/corpus.h"

namespace nmt {

constexpr int64_t kShardPairs = int64_t{1} << 16;

// Bytes per id for a vocabulary of `size` entries: 1, 2 or 4.
int token_width_for(int64_t size);

// The bytes of one shard holding `pairs` (at most kShardPairs), ids `token_width` bytes wide.
std::string make_shard(const std::vector<Example>& pairs, int token_width);

class TokenCorpus {
 public:
  TokenCorpus() = default;
  // Views `shards` (each the bytes of make_shard; every shard but the last holds kShardPairs pairs),
  // kept alive by `storage`. Throws std::runtime_error naming `origin` when a shard's sizes or
  // offsets do not add up (a damaged file), so nothing is ever read out of bounds.
  TokenCorpus(const std::vector<std::pair<const unsigned char*, size_t>>& shards, int token_width,
              std::shared_ptr<const void> storage, const std::string& origin);

  int64_t size() const { return size_; }
  int token_width() const { return token_width_; }
  int64_t source_length(int64_t pair) const;  // ids, without EOS
  int64_t target_length(int64_t pair) const;
  std::vector<int64_t> source(int64_t pair) const;
  std::vector<int64_t> target(int64_t pair) const;

  // The pairs whose sides both have at most `max_length` ids, in order.
  std::vector<int64_t> within_length(int64_t max_length) const;

 private:
  struct Shard {
    int64_t pairs = 0;
    const uint32_t* offsets[2] = {nullptr, nullptr};   // source, target: [pairs + 1]
    const unsigned char* ids[2] = {nullptr, nullptr};  // source, target
  };
  int64_t length(int side, int64_t pair) const;
  std::vector<int64_t> ids(int side, int64_t pair) const;

  std::vector<Shard> shards_;
  int64_t size_ = 0;
  int token_width_ = 4;
  std::shared_ptr<const void> storage_;
};

// Every pair of `corpus`: 0 .. size - 1.
std::vector<int64_t> all_pairs(const TokenCorpus& corpus);

// A corpus in memory (dev sets, tests): `pairs` split into shards.
TokenCorpus corpus_in_memory(const std::vector<Example>& pairs, int token_width);

}  // namespace nmt
