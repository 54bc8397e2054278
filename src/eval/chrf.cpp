// Corpus chrF as sacreBLEU 2.x computes it (sacrebleu/metrics/chrf.py), and its report line.
#include "eval/chrf.h"

#include "text/utf8.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <unordered_map>

#include "eval/corpus_metric.h"
#include "eval/ngram_hash.h"
#include "eval/tokenize_13a.h"
#include "util/format.h"

// Floating point note: every formula below performs the same IEEE operations
// in the same order as sacreBLEU's Python, so results agree bit for bit. The
// only multiply-add pair (chrF's beta^2 * precision + recall) multiplies by
// 4.0, which is exact, so FMA contraction cannot change it either.

namespace nmt::eval {
namespace {

constexpr int kChrfCharOrder = 6;  // sacrebleu/metrics/chrf.py, CHRF.CHAR_ORDER
constexpr int kChrfBeta = 2;       // sacrebleu/metrics/chrf.py, CHRF.BETA

// A character n-gram of order 1..6 packed as 21-bit code points; n-grams of
// different orders live in different maps, so zero padding is unambiguous.
struct CharNgram {
  std::uint64_t low;
  std::uint64_t high;
  bool operator==(const CharNgram& other) const { return low == other.low && high == other.high; }
};

struct CharNgramHash {
  std::size_t operator()(const CharNgram& ngram) const {
    return static_cast<std::size_t>(detail::mix_bits(ngram.low) ^
                                    (detail::mix_bits(ngram.high) * 0x9E3779B97F4A7C15ULL));
  }
};

using CharNgramCounts = std::unordered_map<CharNgram, long long, CharNgramHash>;

struct CharNgramProfile {
  std::array<CharNgramCounts, kChrfCharOrder> counts;  // index = order - 1
  std::array<long long, kChrfCharOrder> totals{};
};

// sacrebleu/metrics/helpers.py, extract_all_char_ngrams with
// include_whitespace=False: drop whitespace (''.join(line.split())), then
// count code-point n-grams of orders 1..6.
void build_char_profile(const std::string& line, CharNgramProfile& profile) {
  std::vector<char32_t> characters;
  characters.reserve(line.size());
  for (std::size_t position = 0; position < line.size();) {
    const std::size_t space = detail::whitespace_length(line, position);
    if (space > 0) {
      position += space;
    } else {
      characters.push_back(next_code_point(line, position));
    }
  }
  for (int order = 1; order <= kChrfCharOrder; ++order) {
    const auto index = static_cast<std::size_t>(order - 1);
    CharNgramCounts& counts = profile.counts[index];
    counts.clear();
    long long total = 0;
    for (std::size_t start = 0; start + static_cast<std::size_t>(order) <= characters.size(); ++start) {
      CharNgram ngram{0, 0};
      for (int offset = 0; offset < order; ++offset) {
        const std::uint64_t code_point = characters[start + static_cast<std::size_t>(offset)];
        if (offset < 3) {
          ngram.low |= code_point << (21 * offset);
        } else {
          ngram.high |= code_point << (21 * (offset - 3));
        }
      }
      ++counts[ngram];
      ++total;
    }
    profile.totals[index] = total;
  }
}

// [hypothesis n-grams, reference n-grams, matches] for each order 1..6.
using ChrfStatistics = std::array<long long, 3 * kChrfCharOrder>;

// sacrebleu/metrics/chrf.py, CHRF._get_match_statistics, order by order.
ChrfStatistics chrf_match_statistics(const CharNgramProfile& hypothesis, const CharNgramProfile& reference) {
  ChrfStatistics statistics{};
  for (std::size_t index = 0; index < static_cast<std::size_t>(kChrfCharOrder); ++index) {
    const CharNgramCounts& reference_counts = reference.counts[index];
    long long matches = 0;
    for (const auto& [ngram, count] : hypothesis.counts[index]) {
      const auto found = reference_counts.find(ngram);
      if (found != reference_counts.end()) {
        matches += std::min(count, found->second);
      }
    }
    // sacreBLEU does not count hypothesis n-grams of an order the
    // reference is too short to have.
    statistics[3 * index] = reference_counts.empty() ? 0 : hypothesis.totals[index];
    statistics[3 * index + 1] = reference.totals[index];
    statistics[3 * index + 2] = matches;
  }
  return statistics;
}

// sacrebleu/metrics/chrf.py, CHRF._compute_f_score with eps_smoothing=False:
// average precision and recall over the orders where both sides have
// n-grams, then F-beta, times 100.
double chrf_f_score(const ChrfStatistics& statistics) {
  const double factor = static_cast<double>(kChrfBeta * kChrfBeta);
  double average_precision = 0.0;
  double average_recall = 0.0;
  int effective_order = 0;
  for (std::size_t index = 0; index < static_cast<std::size_t>(kChrfCharOrder); ++index) {
    const long long hypothesis_count = statistics[3 * index];
    const long long reference_count = statistics[3 * index + 1];
    const long long matches = statistics[3 * index + 2];
    if (hypothesis_count > 0 && reference_count > 0) {
      average_precision += static_cast<double>(matches) / static_cast<double>(hypothesis_count);
      average_recall += static_cast<double>(matches) / static_cast<double>(reference_count);
      ++effective_order;
    }
  }
  if (effective_order == 0) {
    return 0.0;
  }
  average_precision /= effective_order;
  average_recall /= effective_order;
  if (average_precision + average_recall == 0.0) {
    return 0.0;
  }
  double score = (1.0 + factor) * average_precision * average_recall;
  score /= (factor * average_precision) + average_recall;
  return 100.0 * score;
}

}  // namespace

std::string ChrfScore::format() const {
  // sacrebleu/metrics/base.py, Score.format with name 'chrF2' (width 2).
  return "chrF" + std::to_string(kChrfBeta) + " = " + format_fixed(score, 2);
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs) {
  detail::check_streams("corpus_chrf", hyps, refs);

  std::set<std::size_t> reference_counts;
  ChrfStatistics corpus_statistics{};
  CharNgramProfile hypothesis_profile;
  std::vector<CharNgramProfile> reference_profiles;

  // sacrebleu/metrics/chrf.py, CHRF._compute_segment_statistics: each
  // sentence contributes the statistics of the reference with the highest
  // sentence-level chrF (the first one on ties).
  for (std::size_t index = 0; index < hyps.size(); ++index) {
    const std::vector<const std::string*> references = detail::sentence_references("corpus_chrf", refs, index);
    reference_counts.insert(references.size());

    build_char_profile(hyps[index], hypothesis_profile);
    if (reference_profiles.size() < references.size()) {
      reference_profiles.resize(references.size());
    }
    ChrfStatistics best_statistics{};
    double best_f_score = -1.0;
    for (std::size_t reference = 0; reference < references.size(); ++reference) {
      build_char_profile(*references[reference], reference_profiles[reference]);
      const ChrfStatistics statistics = chrf_match_statistics(hypothesis_profile, reference_profiles[reference]);
      const double f_score = chrf_f_score(statistics);
      if (f_score > best_f_score) {
        best_f_score = f_score;
        best_statistics = statistics;
      }
    }
    for (std::size_t slot = 0; slot < corpus_statistics.size(); ++slot) {
      corpus_statistics[slot] += best_statistics[slot];
    }
  }

  ChrfScore result;
  result.score = chrf_f_score(corpus_statistics);
  // sacrebleu/metrics/chrf.py, CHRFSignature field order.
  result.signature = "nrefs:" + detail::number_of_references_field(reference_counts, refs.size()) +
                     "|case:mixed|eff:yes|nc:" + std::to_string(kChrfCharOrder) +
                     "|nw:0|space:no|version:" + detail::kVersionTag;
  return result;
}

}  // namespace nmt::eval
