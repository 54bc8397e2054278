#include "text/token_corpus.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace nmt {
namespace {

size_t aligned(size_t bytes) { return (bytes + 7) / 8 * 8; }

// Where the parts of a shard of `pairs` pairs with these id counts start, and its whole size.
struct ShardLayout {
  size_t offsets[2];
  size_t ids[2];
  size_t total;
};

ShardLayout layout(uint64_t pairs, uint64_t source_ids, uint64_t target_ids, int token_width) {
  ShardLayout parts{};
  parts.offsets[0] = 8;
  parts.offsets[1] = parts.offsets[0] + aligned((pairs + 1) * 4);
  parts.ids[0] = parts.offsets[1] + aligned((pairs + 1) * 4);
  parts.ids[1] = parts.ids[0] + aligned(source_ids * static_cast<uint64_t>(token_width));
  parts.total = parts.ids[1] + aligned(target_ids * static_cast<uint64_t>(token_width));
  return parts;
}

void write_id(unsigned char* out, int64_t id, int token_width) {
  if (id < 0 || (token_width < 4 && id >= (int64_t{1} << (8 * token_width))) || id > UINT32_MAX) {
    throw std::logic_error("token id " + std::to_string(id) + " does not fit " + std::to_string(token_width) +
                           " byte(s)");
  }
  const auto value = static_cast<uint32_t>(id);
  std::memcpy(out, &value, static_cast<size_t>(token_width));  // little-endian: the low bytes
}

int64_t read_id(const unsigned char* in, int token_width) {
  uint32_t value = 0;
  std::memcpy(&value, in, static_cast<size_t>(token_width));
  return value;
}

}  // namespace

int token_width_for(int64_t size) { return size <= 256 ? 1 : size <= 65536 ? 2 : 4; }

std::string make_shard(const std::vector<Example>& pairs, int token_width) {
  if (static_cast<int64_t>(pairs.size()) > kShardPairs) throw std::logic_error("make_shard: too many pairs");
  uint64_t counts[2] = {0, 0};
  for (const Example& pair : pairs) counts[0] += pair.source.size(), counts[1] += pair.target.size();
  if (counts[0] > UINT32_MAX || counts[1] > UINT32_MAX) throw std::runtime_error("a shard's ids overflow 32 bits");
  const ShardLayout parts = layout(pairs.size(), counts[0], counts[1], token_width);
  std::string bytes(parts.total, '\0');
  auto* out = reinterpret_cast<unsigned char*>(bytes.data());
  const uint64_t pair_count = pairs.size();
  std::memcpy(out, &pair_count, 8);
  for (int side = 0; side < 2; ++side) {
    uint32_t offset = 0;
    unsigned char* ids = out + parts.ids[side];
    for (size_t i = 0; i <= pairs.size(); ++i) {
      std::memcpy(out + parts.offsets[side] + 4 * i, &offset, 4);
      if (i == pairs.size()) break;
      for (const int64_t id : side == 0 ? pairs[i].source : pairs[i].target) {
        write_id(ids + static_cast<size_t>(offset) * token_width, id, token_width);
        ++offset;
      }
    }
  }
  return bytes;
}

TokenCorpus::TokenCorpus(const std::vector<std::pair<const unsigned char*, size_t>>& shards, int token_width,
                         std::shared_ptr<const void> storage, const std::string& origin)
    : token_width_(token_width), storage_(std::move(storage)) {
  const auto damaged = [&](size_t index, const std::string& what) {
    return std::runtime_error(origin + ": shard " + std::to_string(index) + " is damaged (" + what + ")");
  };
  for (size_t index = 0; index < shards.size(); ++index) {
    const auto [data, size] = shards[index];
    if (size < 8) throw damaged(index, "shorter than its header");
    uint64_t pairs = 0;
    std::memcpy(&pairs, data, 8);
    const bool last = index + 1 == shards.size();
    if (pairs > static_cast<uint64_t>(kShardPairs) || (!last && pairs != static_cast<uint64_t>(kShardPairs))) {
      throw damaged(index, "pair count " + std::to_string(pairs));
    }
    const ShardLayout head = layout(pairs, 0, 0, token_width);
    if (head.ids[0] > size) throw damaged(index, "offsets past its end");
    Shard shard;
    shard.pairs = static_cast<int64_t>(pairs);
    for (int side = 0; side < 2; ++side) {
      shard.offsets[side] = reinterpret_cast<const uint32_t*>(data + head.offsets[side]);
      if (shard.offsets[side][0] != 0) throw damaged(index, "first offset not 0");
      for (uint64_t i = 0; i < pairs; ++i) {
        if (shard.offsets[side][i + 1] < shard.offsets[side][i]) throw damaged(index, "offsets not increasing");
      }
    }
    const ShardLayout parts = layout(pairs, shard.offsets[0][pairs], shard.offsets[1][pairs], token_width);
    if (parts.total != size)
      throw damaged(index, "size " + std::to_string(size) + ", expected " + std::to_string(parts.total));
    shard.ids[0] = data + parts.ids[0];
    shard.ids[1] = data + parts.ids[1];
    shards_.push_back(shard);
    size_ += shard.pairs;
  }
}

int64_t TokenCorpus::length(int side, int64_t pair) const {
  const Shard& shard = shards_[static_cast<size_t>(pair / kShardPairs)];
  const int64_t local = pair % kShardPairs;
  return static_cast<int64_t>(shard.offsets[side][local + 1]) - shard.offsets[side][local];
}

std::vector<int64_t> TokenCorpus::ids(int side, int64_t pair) const {
  const Shard& shard = shards_[static_cast<size_t>(pair / kShardPairs)];
  const int64_t local = pair % kShardPairs;
  const uint32_t begin = shard.offsets[side][local], end = shard.offsets[side][local + 1];
  std::vector<int64_t> out;
  out.reserve(end - begin);
  for (uint32_t k = begin; k < end; ++k) {
    out.push_back(read_id(shard.ids[side] + static_cast<size_t>(k) * token_width_, token_width_));
  }
  return out;
}

int64_t TokenCorpus::source_length(int64_t pair) const { return length(0, pair); }
int64_t TokenCorpus::target_length(int64_t pair) const { return length(1, pair); }
std::vector<int64_t> TokenCorpus::source(int64_t pair) const { return ids(0, pair); }
std::vector<int64_t> TokenCorpus::target(int64_t pair) const { return ids(1, pair); }

std::vector<int64_t> TokenCorpus::within_length(int64_t max_length) const {
  std::vector<int64_t> kept;
  for (int64_t pair = 0; pair < size_; ++pair) {
    if (source_length(pair) <= max_length && target_length(pair) <= max_length) kept.push_back(pair);
  }
  return kept;
}

std::vector<int64_t> all_pairs(const TokenCorpus& corpus) {
  std::vector<int64_t> pairs(static_cast<size_t>(corpus.size()));
  std::iota(pairs.begin(), pairs.end(), 0);
  return pairs;
}

TokenCorpus corpus_in_memory(const std::vector<Example>& pairs, int token_width) {
  auto shards = std::make_shared<std::vector<std::string>>();
  for (size_t begin = 0; begin < pairs.size(); begin += static_cast<size_t>(kShardPairs)) {
    const size_t end = std::min(pairs.size(), begin + static_cast<size_t>(kShardPairs));
    shards->push_back(make_shard(std::vector<Example>(pairs.begin() + static_cast<std::ptrdiff_t>(begin),
                                                      pairs.begin() + static_cast<std::ptrdiff_t>(end)),
                                 token_width));
  }
  std::vector<std::pair<const unsigned char*, size_t>> views;
  for (const std::string& shard : *shards) {
    views.emplace_back(reinterpret_cast<const unsigned char*>(shard.data()), shard.size());
  }
  return TokenCorpus(views, token_width, shards, "in-memory corpus");
}

}  // namespace nmt
