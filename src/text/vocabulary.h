// A sentencepiece subword vocabulary. The model proto travels inside checkpoints, so translation
// needs nothing but the model directory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/enum_names.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace nmt {

// A range of bytes [begin, end) of a text.
struct ByteSpan {
  size_t begin = 0;
  size_t end = 0;
};

class Vocabulary {
 public:
  // Loads a serialized sentencepiece model; `origin` names where it came from, for errors.
  static Vocabulary from_serialized(const std::string& model_proto, const std::string& origin);

  // Subword ids of `text`, without BOS/EOS.
  std::vector<int64_t> encode(const std::string& text) const;
  // encode(), and the bytes of `text` each subword came from (*spans, one per id).
  std::vector<int64_t> encode(const std::string& text, std::vector<ByteSpan>* spans) const;
  // Detokenized text; special ids are dropped.
  std::string decode(const std::vector<int64_t>& ids) const;
  // decode(), and the bytes of the text each id gave (*spans, one per id; empty for a dropped one).
  std::string decode(const std::vector<int64_t>& ids, std::vector<ByteSpan>* spans) const;
  // One segmentation of `text` drawn at random (subword regularisation, text/subword_sampling.h):
  // a unigram model's from its `nbest` best (-1: from all, over the whole lattice) with
  // probabilities P(x)^alpha, a BPE model's with each merge dropped with probability alpha
  // (BPE-dropout). sentencepiece draws from its generator of the calling thread.
  std::vector<int64_t> sample_encode(const std::string& text, int nbest, double alpha) const;
  // Whether `id` is a control symbol (a tag, a language token; BOS, EOS): no text encodes to it.
  bool is_control(int64_t id) const;
  // Whether `id` stands for text the vocabulary has no subword for: <unk>, or one of byte
  // fallback's bytes.
  bool is_fallback(int64_t id) const;
  std::string piece(int64_t id) const;
  // The id of `tag` when the vocabulary reserves it as a control symbol (VocabularyTrainingOptions::
  // tags), else -1. Text never encodes to a control symbol and decode() drops it.
  int64_t tag_id(const std::string& tag) const;
  // How many placeholder tokens (text/special_tokens.h) the vocabulary holds as pieces of their
  // own: kPlaceholderTokens when it was trained with them, 0 for one trained without.
  int placeholder_tokens() const;
  int64_t size() const;
  bool loaded() const { return processor_ != nullptr; }  // false for a default-made one
  const std::string& serialized() const { return serialized_; }

 private:
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::string serialized_;
};

// Vocabulary::encode for a corpus, through a cache of whole words' ids: a line is cut at ASCII
// spaces and each word's ids are looked up, or encoded alone and kept. The ids are exactly
// Vocabulary::encode's: sentencepiece normalises a word the same alone as inside its line (no
// normalisation rule reaches across an ASCII space, runs of spaces collapse, and a dummy prefix
// stands for the space before the word) and never makes a piece across a space. A vocabulary for
// which that does not hold (checked on probes when the cache is made: e.g. one trained without the
// dummy prefix) is encoded line by line, as everything is with NMT_WORD_CACHE=off (for
// comparisons). One per thread; at most `max_words` words are kept.
class WordCachedEncoder {
 public:
  explicit WordCachedEncoder(const Vocabulary& vocabulary, size_t max_words = size_t{1} << 17);
  std::vector<int64_t> encode(const std::string& line);
  bool caching() const { return caching_; }

 private:
  const Vocabulary& vocabulary_;
  size_t max_words_;
  bool caching_;
  std::unordered_map<std::string, std::vector<int64_t>> words_;
  std::string key_;  // the word being looked up (its capacity reused)
};

// sentencepiece's model type.
enum class VocabType { kUnigram, kBpe };

const EnumNames<VocabType>& vocab_type_names();  // sentencepiece's names: unigram, bpe
std::string to_string(VocabType value);

// The largest vocabulary `nmt train` builds: the output layer of a 512-wide decoder over it
// already takes a gigabyte.
constexpr int kMaxVocabularySize = 500000;

// The smallest vocabulary with byte fallback: the 256 bytes, the special tokens and room for
// subwords.
constexpr int kMinByteFallbackVocabulary = 384;

struct VocabularyTrainingOptions {
  VocabType type = VocabType::kUnigram;
  int size = 8000;  // upper bound: sentencepiece shrinks it for tiny corpora
  int seed = 1;
  int threads = 1;
  bool byte_fallback = false;  // the 256 bytes as pieces (<0x00> ... <0xFF>): no character is <unk>
  // Reserved source tokens (tagged back-translation: "<bt>"), control symbols at the ids after the
  // special ones: corpora prepend them by id; no text encodes to them.
  std::vector<std::string> tags;
  // Placeholder tokens ｟1｠ ... ｟N｠ (text/special_tokens.h) as pieces text encodes to, for training
  // pairs with masked spans (placeholder-share); 0: none.
  int placeholders = 0;
};

// Trains a vocabulary on `sentences` and returns the serialized model proto. The special ids of
// text/special_tokens.h are fixed here.
std::string train_vocabulary(const std::vector<const std::vector<std::string>*>& sentences,
                             const VocabularyTrainingOptions& options);

}  // namespace nmt
