// Subword regularisation: each epoch trains on its pairs segmented anew (Kudo 2018's sampling from
// a unigram model, with alpha and an n-best size; Provilkov et al. 2020's BPE-dropout for a BPE
// model), never validation or translation, which keep the one best segmentation.
//
// The prepared corpus stays as it is, memory-mapped: an epoch's segmentations are drawn from its
// pairs (each side decoded to its text, then sampled by sentencepiece) into a corpus in memory, on
// a thread of its own while the epoch before trains. The draws of epoch e come from a generator
// seeded by the run's seed and e alone, in the pairs' order, so that a resumed run and an
// uninterrupted one train on the same segmentations.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "text/token_corpus.h"
#include "text/vocabulary.h"

namespace nmt {

struct SubwordSampling {
  // Unigram: the smoothing exponent of P(x)^alpha (smaller: flatter, more varied); BPE: the
  // probability of dropping each merge. 0: off.
  double alpha = 0;
  // Unigram: draw among the n best segmentations of each sentence; -1: among all of them.
  int nbest = -1;
  // A side drawn longer than this many subwords (its control symbols included) keeps its best
  // segmentation, as training keeps pairs within max-length; 0: no limit.
  int64_t max_length = 0;

  bool on() const { return alpha > 0; }
};

struct SampledCorpus {
  TokenCorpus corpus;
  double seconds = 0;  // drawing it, on its own thread
};

// `corpus` with the pairs `pairs` lists (an epoch's, repeats allowed) segmented anew on both sides;
// the others, and the control symbols each source starts with (tags, language tokens), as they
// are. A side that samples to nothing, holds <unk> (whose text is no longer the original's) or
// samples longer than sampling.max_length keeps its ids. Drawn on a new thread whose sentencepiece
// generator is seeded with `seed`: the same seed and pairs give the same corpus. Once `*cancel` is
// set, the thread stops within a few pairs and its corpus is not to be used.
std::future<SampledCorpus> sample_segmentations(const TokenCorpus& corpus, std::vector<int64_t> pairs,
                                                const Vocabulary& source_vocabulary,
                                                const Vocabulary& target_vocabulary, SubwordSampling sampling,
                                                unsigned int seed,
                                                std::shared_ptr<const std::atomic<bool>> cancel = nullptr);

}  // namespace nmt
