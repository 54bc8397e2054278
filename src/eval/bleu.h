// Corpus BLEU, reproducing sacreBLEU 2.x (sacrebleu/metrics/bleu.py with its
// default settings) digit for digit. chrF is in eval/chrf.h.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace nmt::eval {

enum class BleuTokenize { k13a, kNone };

struct BleuOptions {
  bool lowercase = false;  // Python str.lower() semantics, like sacreBLEU's -lc
  BleuTokenize tokenize = BleuTokenize::k13a;
};

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // percent, as sacreBLEU reports
  std::array<long long, 4> matches{}, totals{};
  double brevity_penalty = 0;
  long long hyp_length = 0, ref_length = 0;
  // sacreBLEU 2.x style, e.g.
  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:nmt-1.0".
  std::string signature;

  // sacreBLEU's BLEUScore.format() without a signature, e.g.
  // "BLEU = 34.12 65.1/40.2/27.3/19.0 (BP = 1.000 ratio = 1.010 hyp_len = 1234 ref_len = 1222)".
  std::string format() const;
};

// refs[k][i] is the k-th reference of sentence i. Every reference stream must
// have hyps.size() lines, otherwise std::invalid_argument naming both counts.
// As in sacreBLEU, an empty reference line ("") means "no k-th reference for
// this sentence"; a sentence whose references are all empty, or an empty
// `refs`, is an error (std::invalid_argument).
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& options = {});

}  // namespace nmt::eval
