// A training corpus encoded once, on all cores, into a file of shards (token_corpus.h) that
// training and --resume memory-map instead of reading and encoding the text again.
//
// File layout (little-endian): "NMTCORP1" and a uint64 format version; the shards, each at an
// 8-byte boundary; the shard table (uint64 offset and size per shard); the header as JSON (token
// width, pair and line counts, the vocabularies' checksums and settings, the path, size and
// modification time of every text file it was made from, and each file pair's tag and count of
// pairs kept); the JSON's offset and length (uint64
// each); and the end mark "NMTCEND1". The file is written under a temporary name and renamed, so
// it is either whole or absent; a truncated, stale or foreign file is detected and prepared again,
// never read as garbage.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "text/corpus.h"
#include "text/token_corpus.h"
#include "text/vocabulary.h"

namespace nmt {

constexpr uint64_t kPreparedCorpusVersion = 2;  // 2: each file pair's tag and pair count

// What a prepared corpus is made from: the text files (pairs matched by position) and the
// vocabularies, plus a text describing the vocabulary settings (for `nmt prepare` and a new run to
// agree on whether the vocabularies next to the file can be reused: "" when the vocabularies come
// from elsewhere, such as a checkpoint, and so were not trained on this text with these settings).
struct CorpusRecipe {
  std::vector<std::string> source_files;
  std::vector<std::string> target_files;
  std::string vocabulary_settings;
  // Per file pair, the tags (text/corpus_mix.h: a language token and a tag, separated by a space)
  // prepended to each of its sources by their ids in the source vocabulary, or ""; an empty list
  // tags none.
  std::vector<std::string> tags;
  // The share of pairs given placeholder tokens for masked spans (text/masking.h), and the seed
  // that picks them; the vocabularies must hold the tokens when the share is above 0.
  double placeholder_share = 0;
  int placeholder_seed = 1;
};

// `train-source` / `train-target` values: comma-separated paths, each possibly a glob pattern
// (expanded and sorted). Throws std::invalid_argument naming `key` when a pattern matches nothing.
std::vector<std::string> expand_file_list(const std::string& value, const std::string& key);

// Encodes the recipe's pairs into `path` on `threads` threads, streaming: about kShardPairs pairs
// of text in memory at a time. Pairs that encode to nothing on a side are skipped as empty; pairs
// over any length limit are kept (training filters them by length when it opens the file). Throws
// std::invalid_argument naming train-tags when the source vocabulary does not hold a tag, and
// placeholder-share when the vocabularies lack placeholder tokens the recipe needs.
void prepare_corpus(const std::string& path, const CorpusRecipe& recipe, const Vocabulary& source_vocabulary,
                    const Vocabulary& target_vocabulary, int threads);

// A mapped prepared corpus and the counts of its making.
struct PreparedCorpus {
  TokenCorpus corpus;
  int64_t lines = 0;                // pairs read from the text
  int64_t empty = 0;                // skipped as empty
  std::string vocabulary_settings;  // as the recipe gave them ("" for a checkpoint's vocabulary)
  std::vector<int64_t> file_pairs;  // pairs kept from each file pair, in order: file i's follow file i-1's
  int64_t masked = 0;               // pairs given placeholder tokens (CorpusRecipe::placeholder_share)
};

// Maps `path` when it was prepared from this recipe's text files (as they are now) with these
// vocabularies, and is whole: marks, header, shard table and every shard's offsets check out.
// Otherwise returns nothing and sets `why`: not prepared yet, truncated, another format version,
// the text changed, the vocabulary changed, or damaged.
std::optional<PreparedCorpus> open_prepared_corpus(const std::string& path, const CorpusRecipe& recipe,
                                                   const Vocabulary& source_vocabulary,
                                                   const Vocabulary& target_vocabulary, std::string& why);

// open_prepared_corpus's `why`, or "" when the file serves.
std::string why_stale(const std::string& path, const CorpusRecipe& recipe, const Vocabulary& source_vocabulary,
                      const Vocabulary& target_vocabulary);

// A vocabulary's checksum (FNV-1a of its serialized model), as recorded in the header.
uint64_t vocabulary_checksum(const Vocabulary& vocabulary);

}  // namespace nmt
