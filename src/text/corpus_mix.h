// Several training corpora in one run (real and back-translated text, say): each an entry of
// train-source and train-target with a weight and an optional tag, and the pairs each epoch takes
// from each of them.
//
// A weight is an oversampling factor: an epoch takes every pair of a corpus of weight 2 twice, and
// a new random half of a corpus of weight 0.5 (drawn from the epoch's seed, so a resumed run draws
// the same). A tag is a reserved source token (tagged back-translation, Caswell et al. 2019)
// prepended to every source sentence of its corpus when the corpus is prepared; the vocabulary
// holds it as a control symbol, so no text encodes to it and decoding drops it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct CorpusSpec {
  std::vector<std::string> source_files;  // one entry of train-source, its glob expanded
  std::vector<std::string> target_files;  // the same entry of train-target
  double weight = 1;
  std::string tag;  // "" for none
};

// Splits `value` at commas, keeping empty items ("" gives one empty item).
std::vector<std::string> split_commas(const std::string& value);

// The corpora of train-source, train-target, train-weights and train-tags: one per non-empty
// comma-separated entry of train-source. An empty `weights` weighs each 1; an empty `tags` tags
// none. Throws std::invalid_argument naming the key: a pattern matching no file, entries of the two
// sides that expand to different numbers of files, a weight list or tag list of another length, a
// weight that is not a number in (0, 1000], a tag that is not a reserved token.
std::vector<CorpusSpec> corpus_specs(const std::string& sources, const std::string& targets, const std::string& weights,
                                     const std::string& tags);

// The syntax checks of corpus_specs that need no files: the number of entries of each list, each
// weight and each tag. Throws std::invalid_argument naming the key.
void check_corpus_lists(const std::string& sources, const std::string& targets, const std::string& weights,
                        const std::string& tags);

// Throws std::invalid_argument naming `key` unless `tag` is a reserved token: "<" and ">" around
// at least one character that is no space, comma, "<" or ">", and not one of the special tokens.
void check_tag(const std::string& tag, const std::string& key);

// The tags of `corpora` and `reserved` (a comma-separated list), each once, in order of first
// appearance: the control symbols of the source vocabulary.
std::vector<std::string> vocabulary_tags(const std::vector<CorpusSpec>& corpora, const std::string& reserved);

// A corpus of a prepared file, as training uses it.
struct CorpusShare {
  std::string name;  // its first source file
  double weight = 1;
  std::string tag;
  std::vector<int64_t> pairs;  // its pairs within max-length, indices into the prepared corpus
};

// What one epoch trains on: the pairs, each corpus's in order (before make_batches shuffles them),
// and how many each corpus gave.
struct EpochMix {
  std::vector<int64_t> pairs;
  std::vector<int64_t> taken;  // per corpus
};

// The pairs of an epoch: floor(weight) times every pair of each corpus, and a draw without
// replacement of round(fraction x size) more, from a generator seeded by `seed`. A corpus of
// weight 1 gives its pairs once, in order, so that one corpus of weight 1 trains on exactly its
// pairs.
EpochMix mix_epoch(const std::vector<CorpusShare>& corpora, uint64_t seed);

// One line for the log: "58000 of data/train.de (weight 2), 116000 of bt.de (weight 1, tag <bt>)".
std::string describe_mix(const std::vector<CorpusShare>& corpora, const EpochMix& mix);

}  // namespace nmt
