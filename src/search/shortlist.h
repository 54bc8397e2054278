// A lexical shortlist: for each source subword the target subwords most likely to translate it,
// plus the most frequent target subwords. Translation with one restricts the output layer of each
// batch to the union of its sentences' lists (as Marian's --shortlist and Sockeye's
// --restrict-lexicon do), so that the output product, the softmax and the beam's top-k run over a
// few hundred or thousand tokens instead of the whole vocabulary.
//
// Built from the training corpus with no outside aligner: a target subword's score for a source
// subword is the Dice coefficient of their sentence co-occurrence,
//   dice(s, t) = 2 c(s, t) / (c(s) + c(t))
// where c counts the pairs in which a subword (or both) occur. Each source subword keeps its
// `translations` best; ties go to the more frequent target subword, then the lower id.
//
// File layout (little-endian): "NMTSLST1", a uint64 format version, a uint64 length and the header
// as JSON (both vocabularies' sizes and checksums, the sizes with the batch they were sized for,
// the pairs counted, where it was made from); the frequent ids (uint32), the offsets of each source
// id's list (uint32, source size + 1), the lists' ids (uint32); the end mark "NMTSEND1". Written to
// a temporary file and renamed.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "search/search.h"
#include "text/token_corpus.h"
#include "text/vocabulary.h"

namespace nmt {

constexpr uint64_t kShortlistVersion = 1;

struct ShortlistSizes {
  // Chosen together on Multi30k's val (scripts/study/shortlist_sizes.py, docs/dev/performance-notes.md).
  int64_t translations = 50;    // target subwords kept per source subword
  int64_t frequent = 500;       // most frequent target subwords, in every batch's list
  int64_t max_pairs = 2000000;  // training pairs counted at most (evenly spread over the corpus)
  // Sentences a batch holds at most when a CPU translates through the shortlist (0: as many as
  // --batch-size says). A batch's list is the union of its sentences' lists, so the output layer
  // grows with the batch; longer lists over fewer sentences give the same BLEU faster. A file
  // written without this key (made for batches of 64) reads as 0.
  int64_t batch_sentences = 8;
};

class Shortlist {
 public:
  // Counts the pairs of `corpus` (at most sizes.max_pairs, evenly spread) with ids below the
  // vocabularies' sizes. `origin` (the model it is for) is recorded in the file.
  static Shortlist build(const TokenCorpus& corpus, const Vocabulary& source_vocabulary,
                         const Vocabulary& target_vocabulary, const ShortlistSizes& sizes, const std::string& origin);

  // Throws std::runtime_error naming `path` for a missing, truncated, foreign or damaged file.
  static Shortlist read(const std::string& path);
  void write(const std::string& path) const;

  // Throws std::invalid_argument naming the file, the model it was made for and `model` (the
  // checkpoint) when the vocabularies are not the ones it was built with.
  void check_vocabularies(const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
                          const std::string& model) const;

  // The output vocabulary of a batch: the special ids, the frequent ids, the lists of every source
  // id of `sources`, and `extra` (prefix and constraint tokens), sorted: [K] int64 on the CPU.
  torch::Tensor select(const std::vector<const std::vector<int64_t>*>& sources,
                       const std::vector<int64_t>& extra = {}) const;

  // The list of source id `source`, best first.
  std::vector<int64_t> translations(int64_t source) const;
  const std::vector<uint32_t>& frequent() const { return frequent_; }
  const ShortlistSizes& sizes() const { return sizes_; }
  int64_t pairs_counted() const { return pairs_; }
  const std::string& path() const { return path_; }

 private:
  struct VocabularyStamp {
    int64_t size = 0;
    uint64_t checksum = 0;
  };
  VocabularyStamp source_, target_;
  ShortlistSizes sizes_;
  int64_t pairs_ = 0;
  std::string origin_;  // the model it was built for
  std::string path_;    // where it was read from
  std::vector<uint32_t> frequent_;
  std::vector<uint32_t> offsets_;  // [source size + 1]
  std::vector<uint32_t> lists_;
};

// search() with the output layer restricted to `ids` ([K] sorted target ids on the device, the
// special ids among them: Shortlist::select): the searches run over those K tokens, so the
// log-probabilities are normalised over them; prefixes and constraints must use only tokens of
// `ids`. The result's tokens are target ids, as search() gives them.
SearchResult search_in_vocabulary(const Ensemble& model, const torch::Tensor& ids, const torch::Tensor& source,
                                  const torch::Tensor& lengths, const SearchOptions& options,
                                  const torch::Tensor& prefix = {}, const BatchConstraints& constraints = {});

}  // namespace nmt
