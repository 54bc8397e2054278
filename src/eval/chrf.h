// Corpus chrF, reproducing sacreBLEU 2.x (sacrebleu/metrics/chrf.py with its
// default settings) digit for digit.
#pragma once

#include <string>
#include <vector>

namespace nmt::eval {

struct ChrfScore {
  double score = 0;  // 0..100
  // e.g. "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:nmt-1.0".
  std::string signature;

  // sacreBLEU's CHRFScore.format() without a signature, e.g. "chrF2 = 58.34".
  std::string format() const;
};

// sacreBLEU 2.x default chrF2: character n-grams up to order 6, no word
// n-grams, beta 2, whitespace removed, case kept, eps_smoothing=False (the
// default "eff:yes" averaging over the n-gram orders that exist). With several
// references, each sentence uses the statistics of its best-scoring one.
// Same stream-length and empty-reference rules as corpus_bleu (eval/bleu.h).
ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs);

}  // namespace nmt::eval
