// What corpus BLEU (eval/bleu.h) and chrF (eval/chrf.h) share, as sacreBLEU's metrics share
// sacrebleu/metrics/base.py: the checks of the reference streams, the references each sentence
// keeps, and the signature fields both write.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace nmt::eval::detail {

// The "version" field of both signatures; it names this implementation, not sacreBLEU.
inline constexpr const char* kVersionTag = "nmt-1.0";

// Throws std::invalid_argument, naming `metric`, when `refs` is empty or a reference stream does
// not have hyps.size() lines.
void check_streams(const char* metric, const std::vector<std::string>& hyps,
                   const std::vector<std::vector<std::string>>& refs);

// The references of sentence `index` that sacreBLEU keeps: empty strings mean
// "this sentence has fewer references" and are dropped; a sentence left with
// none is an error (sacrebleu/metrics/base.py, Metric._cache_references).
std::vector<const std::string*> sentence_references(const char* metric,
                                                    const std::vector<std::vector<std::string>>& refs,
                                                    std::size_t index);

// The "nrefs" signature field: the per-sentence reference count when it is
// the same everywhere, else "var" (sacrebleu/metrics/base.py, Signature).
std::string number_of_references_field(const std::set<std::size_t>& counts, std::size_t streams);

}  // namespace nmt::eval::detail
