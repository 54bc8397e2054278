#include "text/subword_sampling.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "text/special_tokens.h"

namespace nmt {
namespace {

// One side of a pair segmented anew: its leading control symbols kept, the rest decoded and drawn.
std::vector<int64_t> resample(const std::vector<int64_t>& ids, const Vocabulary& vocabulary,
                              const SubwordSampling& sampling) {
  size_t kept = 0;
  while (kept < ids.size() && vocabulary.is_control(ids[kept])) ++kept;
  if (kept == ids.size() || std::find(ids.begin(), ids.end(), kUnkId) != ids.end()) return ids;
  const std::string text =
      vocabulary.decode(std::vector<int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end()));
  std::vector<int64_t> drawn = vocabulary.sample_encode(text, sampling.nbest, sampling.alpha);
  const bool too_long = sampling.max_length > 0 && static_cast<int64_t>(drawn.size() + kept) > sampling.max_length;
  if (drawn.empty() || too_long) return ids;
  drawn.insert(drawn.begin(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept));
  return drawn;
}

// The draw of sample_segmentations, on its own thread, `seeding` held.
SampledCorpus draw(const TokenCorpus& corpus, const std::vector<int64_t>& pairs, const Vocabulary& source_vocabulary,
                   const Vocabulary& target_vocabulary, const SubwordSampling& sampling, unsigned int seed,
                   const std::atomic<bool>* cancel) {
  const auto start = std::chrono::steady_clock::now();
  sentencepiece::SetRandomGeneratorSeed(seed);
  std::vector<char> drawn(static_cast<size_t>(corpus.size()), 0);
  for (const int64_t pair : pairs) drawn[static_cast<size_t>(pair)] = 1;
  std::vector<Example> examples(static_cast<size_t>(corpus.size()));
  for (int64_t pair = 0; pair < corpus.size(); ++pair) {
    if (cancel != nullptr && (pair & 255) == 0 && cancel->load()) return {};
    Example& example = examples[static_cast<size_t>(pair)];
    example.source = corpus.source(pair);
    example.target = corpus.target(pair);
    if (!drawn[static_cast<size_t>(pair)]) continue;
    example.source = resample(example.source, source_vocabulary, sampling);
    example.target = resample(example.target, target_vocabulary, sampling);
  }
  SampledCorpus sampled{corpus_in_memory(examples, corpus.token_width())};
  sampled.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sampled;
}

}  // namespace

std::future<SampledCorpus> sample_segmentations(const TokenCorpus& corpus, std::vector<int64_t> pairs,
                                                const Vocabulary& source_vocabulary,
                                                const Vocabulary& target_vocabulary, SubwordSampling sampling,
                                                unsigned int seed, std::shared_ptr<const std::atomic<bool>> cancel) {
  // A new thread (std::launch::async): sentencepiece seeds a thread's generator from the process's
  // seed when the thread first draws, so the seed is set and every draw made under this lock.
  static std::mutex seeding;
  return std::async(std::launch::async, [=, pairs = std::move(pairs)] {
    const std::lock_guard<std::mutex> lock(seeding);
    return draw(corpus, pairs, source_vocabulary, target_vocabulary, sampling, seed, cancel.get());
  });
}

}  // namespace nmt
