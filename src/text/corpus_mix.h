// Several training corpora in one run (real and back-translated text, or several language pairs):
// each an entry of train-source and train-target with a weight, an optional tag and an optional
// target language, and the pairs each epoch takes from each of them.
//
// A weight is an oversampling factor: an epoch takes every pair of a corpus of weight 2 twice, and
// a new random half of a corpus of weight 0.5 (drawn from the epoch's seed, so a resumed run draws
// the same). With train-temperature T instead, the weights follow from the corpora's sizes: corpus
// i's share of an epoch is n_i^(1/T) / sum_j n_j^(1/T) (Arivazhagan et al. 2019): T = 1 takes each
// as it is, a larger T gives a small corpus more of each epoch, T = 1000 nearly the same share to
// each. A tag is a reserved source token (tagged back-translation, Caswell et al. 2019) prepended to
// every source sentence of its corpus when the corpus is prepared; a target language puts its
// token <2xx> (text/languages.h) in front of that. The vocabulary holds them as control symbols, so
// no text encodes to them and decoding drops them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct CorpusSpec {
  std::vector<std::string> source_files;  // one entry of train-source, its glob expanded
  std::vector<std::string> target_files;  // the same entry of train-target
  double weight = 1;
  std::string tag;       // "" for none
  std::string language;  // the target language (train-languages), "" for none

  // The tokens its source sentences start with: the language's, then the tag, separated by a
  // space ("<2en> <bt>"); "" for none.
  std::string source_tokens() const;
};

// The keys that describe the corpora, as the configuration gives them (comma-separated lists).
struct CorpusLists {
  std::string sources;    // train-source
  std::string targets;    // train-target
  std::string weights;    // train-weights
  std::string tags;       // train-tags
  std::string languages;  // train-languages
};

// Splits `value` at commas, keeping empty items ("" gives one empty item).
std::vector<std::string> split_commas(const std::string& value);
// The non-empty items of split_commas(value).
std::vector<std::string> non_empty_items(const std::string& value);

// The corpora of the lists: one per non-empty comma-separated entry of train-source. An empty
// `weights` weighs each 1; an empty `tags` tags none; empty `languages` names none. Throws
// std::invalid_argument naming the key: a pattern matching no file, entries of the two sides that
// expand to different numbers of files, a weight, tag or language list of another length, a weight
// that is not a number in (0, 1000], a tag that is not a reserved token, a language that is not an
// ISO 639 code, languages for some corpora but not all.
std::vector<CorpusSpec> corpus_specs(const CorpusLists& lists);

// The syntax checks of corpus_specs that need no files: the number of entries of each list, each
// weight, tag and language. Throws std::invalid_argument naming the key.
void check_corpus_lists(const CorpusLists& lists);

// Throws std::invalid_argument naming `key` unless `tag` is a reserved token: "<" and ">" around
// at least one character that is no space, comma, "<" or ">", and not one of the special tokens.
void check_tag(const std::string& tag, const std::string& key);

// The language tokens and tags of `corpora` and `reserved` (a comma-separated list), each once, in
// order of first appearance (a corpus's language token before its tag): the control symbols of the
// source vocabulary.
std::vector<std::string> vocabulary_tags(const std::vector<CorpusSpec>& corpora, const std::string& reserved);

// The weights that give corpora of `sizes` pairs their shares of an epoch at `temperature`
// (train-temperature): n_i^(1/T) / sum_j n_j^(1/T) of an epoch as long as all of them together. A
// corpus of no pairs weighs 1.
std::vector<double> temperature_weights(const std::vector<int64_t>& sizes, double temperature);

// A corpus of a prepared file, as training uses it.
struct CorpusShare {
  std::string name;  // its first source file
  double weight = 1;
  std::string tag;
  std::vector<int64_t> pairs;  // its pairs within max-length, indices into the prepared corpus
  std::string language;        // its target language, or ""
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

// One line for the log: "58000 of data/train.de (weight 2), 116000 of bt.de (weight 1, tag <bt>)";
// a corpus with a target language says "into en".
std::string describe_mix(const std::vector<CorpusShare>& corpora, const EpochMix& mix);

}  // namespace nmt
