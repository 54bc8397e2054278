// Corpus BLEU as sacreBLEU 2.x computes it (sacrebleu/metrics/bleu.py), and its report line.
#include "eval/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>
#include <unordered_map>

#include "eval/corpus_metric.h"
#include "eval/lowercase.h"
#include "eval/ngram_hash.h"
#include "eval/tokenize_13a.h"
#include "util/format.h"

// Floating point note: every formula below performs the same IEEE operations
// in the same order as sacreBLEU's Python, so results agree bit for bit.

namespace nmt::eval {
namespace {

constexpr int kBleuMaxOrder = 4;  // sacrebleu/metrics/bleu.py, MAX_NGRAM_ORDER

constexpr std::uint32_t kNoToken = 0xFFFFFFFFu;

// A word n-gram of order 1..4 as token ids; unused slots hold kNoToken.
struct WordNgram {
  std::array<std::uint32_t, kBleuMaxOrder> tokens;

  std::size_t order() const {
    std::size_t count = 0;
    while (count < tokens.size() && tokens[count] != kNoToken) {
      ++count;
    }
    return count;
  }
  bool operator==(const WordNgram& other) const { return tokens == other.tokens; }
};

struct WordNgramHash {
  std::size_t operator()(const WordNgram& ngram) const {
    const std::uint64_t low = (std::uint64_t{ngram.tokens[0]} << 32) | ngram.tokens[1];
    const std::uint64_t high = (std::uint64_t{ngram.tokens[2]} << 32) | ngram.tokens[3];
    return static_cast<std::size_t>(detail::mix_bits(low) ^ (detail::mix_bits(high) * 0x9E3779B97F4A7C15ULL));
  }
};

using WordNgramCounts = std::unordered_map<WordNgram, long long, WordNgramHash>;

// Maps token strings of one sentence to small ids so n-grams can be hashed
// without building a string per n-gram.
class SentenceVocabulary {
 public:
  std::vector<std::uint32_t> ids(const std::vector<std::string_view>& tokens) {
    std::vector<std::uint32_t> result;
    result.reserve(tokens.size());
    for (const std::string_view token : tokens) {
      const auto inserted = ids_.emplace(token, static_cast<std::uint32_t>(ids_.size()));
      result.push_back(inserted.first->second);
    }
    return result;
  }
  void clear() { ids_.clear(); }

 private:
  std::unordered_map<std::string_view, std::uint32_t> ids_;
};

// sacrebleu/metrics/helpers.py, extract_all_word_ngrams: all n-grams of
// orders 1..4 of the whitespace-split line, with counts.
void count_word_ngrams(const std::vector<std::uint32_t>& tokens, WordNgramCounts& counts) {
  counts.clear();
  for (int order = 1; order <= kBleuMaxOrder; ++order) {
    for (std::size_t start = 0; start + static_cast<std::size_t>(order) <= tokens.size(); ++start) {
      WordNgram ngram{};
      ngram.tokens.fill(kNoToken);
      for (int offset = 0; offset < order; ++offset) {
        ngram.tokens[static_cast<std::size_t>(offset)] = tokens[start + static_cast<std::size_t>(offset)];
      }
      ++counts[ngram];
    }
  }
}

// sacrebleu/metrics/bleu.py, BLEU._preprocess_segment: optional lowercasing,
// rstrip, then the tokenizer ('none' returns the line unchanged).
std::string preprocess_bleu_segment(const std::string& segment, const BleuOptions& options) {
  const std::string cased = options.lowercase ? python_lower(segment) : segment;
  const std::string stripped(detail::rstrip_whitespace(cased));
  return options.tokenize == BleuTokenize::k13a ? tokenize_13a(stripped) : stripped;
}

// sacrebleu/metrics/bleu.py, BLEU._get_closest_ref_len: the reference length
// closest to the hypothesis length, the shorter one on ties.
long long closest_reference_length(long long hyp_length, const std::vector<long long>& ref_lengths) {
  long long closest_difference = -1;
  long long closest_length = -1;
  for (const long long ref_length : ref_lengths) {
    const long long difference = std::llabs(hyp_length - ref_length);
    if (closest_difference == -1 || difference < closest_difference) {
      closest_difference = difference;
      closest_length = ref_length;
    } else if (difference == closest_difference && ref_length < closest_length) {
      closest_length = ref_length;
    }
  }
  return closest_length;
}

// sacrebleu/utils.py, my_log: log with log(0) floored to -9999999999.
double floored_log(double value) { return value == 0.0 ? -9999999999.0 : std::log(value); }

// CPython >= 3.12 builtin sum() over floats, which sacreBLEU uses to add the
// log precisions: Neumaier-compensated summation (Python/bltinmodule.c).
double python_float_sum(const std::array<double, kBleuMaxOrder>& values) {
  double sum = values[0];
  double compensation = 0.0;
  for (std::size_t index = 1; index < values.size(); ++index) {
    const double value = values[index];
    const double updated = sum + value;
    if (std::fabs(sum) >= std::fabs(value)) {
      compensation += (sum - updated) + value;
    } else {
      compensation += (value - updated) + sum;
    }
    sum = updated;
  }
  if (compensation != 0.0 && std::isfinite(compensation)) {
    sum += compensation;
  }
  return sum;
}

// sacrebleu/metrics/bleu.py, BLEU.compute_bleu with smooth_method='exp',
// effective_order=False.
void compute_bleu(BleuScore& result) {
  if (result.hyp_length < result.ref_length) {
    result.brevity_penalty =
        result.hyp_length > 0
            ? std::exp(1.0 - static_cast<double>(result.ref_length) / static_cast<double>(result.hyp_length))
            : 0.0;
  } else {
    result.brevity_penalty = 1.0;
  }
  result.precisions.fill(0.0);
  result.score = 0.0;

  // Early stop when nothing matched (sacreBLEU issue #141).
  const bool any_match =
      std::any_of(result.matches.begin(), result.matches.end(), [](long long matches) { return matches != 0; });
  if (!any_match) {
    return;
  }

  // 'exp' smoothing (NIST mteval-v13a): the k-th order with zero matches
  // gets precision 100 / (2^k * total).
  double smoothing = 1.0;
  for (int order = 0; order < kBleuMaxOrder; ++order) {
    const auto index = static_cast<std::size_t>(order);
    if (result.totals[index] == 0) {
      break;  // remaining precisions stay 0 and floor the score to 0
    }
    if (result.matches[index] == 0) {
      smoothing *= 2.0;
      result.precisions[index] = 100.0 / (smoothing * static_cast<double>(result.totals[index]));
    } else {
      result.precisions[index] =
          100.0 * static_cast<double>(result.matches[index]) / static_cast<double>(result.totals[index]);
    }
  }

  std::array<double, kBleuMaxOrder> logs{};
  for (std::size_t index = 0; index < logs.size(); ++index) {
    logs[index] = floored_log(result.precisions[index]);
  }
  result.score = result.brevity_penalty * std::exp(python_float_sum(logs) / static_cast<double>(kBleuMaxOrder));
}

}  // namespace

std::string BleuScore::format() const {
  // sacrebleu/metrics/bleu.py, BLEUScore + sacrebleu/metrics/base.py,
  // Score.format (width 2, no signature).
  std::string precision_text;
  for (std::size_t index = 0; index < precisions.size(); ++index) {
    if (index > 0) {
      precision_text += '/';
    }
    precision_text += format_fixed(precisions[index], 1);
  }
  const double ratio = ref_length != 0 ? static_cast<double>(hyp_length) / static_cast<double>(ref_length) : 0.0;
  return "BLEU = " + format_fixed(score, 2) + " " + precision_text + " (BP = " + format_fixed(brevity_penalty, 3) +
         " ratio = " + format_fixed(ratio, 3) + " hyp_len = " + std::to_string(hyp_length) +
         " ref_len = " + std::to_string(ref_length) + ")";
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& options) {
  detail::check_streams("corpus_bleu", hyps, refs);

  BleuScore result;
  std::set<std::size_t> reference_counts;
  SentenceVocabulary vocabulary;
  WordNgramCounts reference_max_counts;
  WordNgramCounts single_reference_counts;
  WordNgramCounts hypothesis_counts;
  std::vector<std::string> processed_references;
  std::vector<long long> reference_lengths;

  // sacrebleu/metrics/bleu.py: _extract_reference_info and
  // _compute_segment_statistics, summed over the corpus.
  for (std::size_t index = 0; index < hyps.size(); ++index) {
    const std::vector<const std::string*> references = detail::sentence_references("corpus_bleu", refs, index);
    reference_counts.insert(references.size());

    vocabulary.clear();
    reference_max_counts.clear();
    processed_references.clear();
    reference_lengths.clear();
    for (const std::string* reference : references) {
      processed_references.push_back(preprocess_bleu_segment(*reference, options));
    }
    for (const std::string& reference : processed_references) {
      const std::vector<std::uint32_t> tokens = vocabulary.ids(detail::split_whitespace(reference));
      reference_lengths.push_back(static_cast<long long>(tokens.size()));
      count_word_ngrams(tokens, single_reference_counts);
      // Clip by the largest count of each n-gram in any one reference.
      for (const auto& [ngram, count] : single_reference_counts) {
        long long& slot = reference_max_counts[ngram];
        slot = std::max(slot, count);
      }
    }

    const std::string hypothesis = preprocess_bleu_segment(hyps[index], options);
    const std::vector<std::uint32_t> hypothesis_tokens = vocabulary.ids(detail::split_whitespace(hypothesis));
    const auto hyp_length = static_cast<long long>(hypothesis_tokens.size());
    result.hyp_length += hyp_length;
    result.ref_length += closest_reference_length(hyp_length, reference_lengths);

    count_word_ngrams(hypothesis_tokens, hypothesis_counts);
    for (const auto& [ngram, count] : hypothesis_counts) {
      const std::size_t order_index = ngram.order() - 1;
      result.totals[order_index] += count;
      const auto found = reference_max_counts.find(ngram);
      if (found != reference_max_counts.end()) {
        result.matches[order_index] += std::min(count, found->second);
      }
    }
  }

  compute_bleu(result);

  // Field order as sacrebleu/metrics/base.py Signature.format with the
  // BLEUSignature fields; version names this implementation, not sacreBLEU.
  result.signature = "nrefs:" + detail::number_of_references_field(reference_counts, refs.size()) +
                     "|case:" + (options.lowercase ? "lc" : "mixed") +
                     "|eff:no|tok:" + (options.tokenize == BleuTokenize::k13a ? "13a" : "none") +
                     "|smooth:exp|version:" + detail::kVersionTag;
  return result;
}

}  // namespace nmt::eval
