// Input checks and reference selection shared by BLEU and chrF.
#include "eval/corpus_metric.h"

#include <stdexcept>

namespace nmt::eval::detail {

void check_streams(const char* metric, const std::vector<std::string>& hyps,
                   const std::vector<std::vector<std::string>>& refs) {
  if (refs.empty()) {
    throw std::invalid_argument(std::string(metric) + ": no reference streams given");
  }
  for (std::size_t stream = 0; stream < refs.size(); ++stream) {
    if (refs[stream].size() != hyps.size()) {
      throw std::invalid_argument(std::string(metric) + ": " + std::to_string(hyps.size()) +
                                  " hypothesis lines but reference stream " + std::to_string(stream) + " has " +
                                  std::to_string(refs[stream].size()) + " lines");
    }
  }
}

// The references of sentence `index` that sacreBLEU keeps: empty strings mean
// "this sentence has fewer references" and are dropped; a sentence left with
// none is an error (sacrebleu/metrics/base.py, Metric._cache_references).
std::vector<const std::string*> sentence_references(const char* metric,
                                                    const std::vector<std::vector<std::string>>& refs,
                                                    std::size_t index) {
  std::vector<const std::string*> kept;
  kept.reserve(refs.size());
  for (const auto& stream : refs) {
    if (!stream[index].empty()) {
      kept.push_back(&stream[index]);
    }
  }
  if (kept.empty()) {
    throw std::invalid_argument(std::string(metric) + ": sentence " + std::to_string(index) +
                                " has only empty references");
  }
  return kept;
}

// The "nrefs" signature field: the per-sentence reference count when it is
// the same everywhere, else "var" (sacrebleu/metrics/base.py, Signature).
std::string number_of_references_field(const std::set<std::size_t>& counts, std::size_t streams) {
  if (counts.empty()) {
    return std::to_string(streams);
  }
  return counts.size() == 1 ? std::to_string(*counts.begin()) : "var";
}

}  // namespace nmt::eval::detail
