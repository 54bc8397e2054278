// Text in, text out: tokenizes, batches sentences by length, searches, and restores input order.
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/translate_options.h"
#include "search/search.h"
#include "search/shortlist.h"
#include "text/vocabulary.h"

namespace nmt {

struct Translation {
  std::vector<std::string> source_pieces;  // the source subwords (attention columns, without EOS)
  std::vector<Hypothesis> hypotheses;      // n-best, best first; empty for an empty input line
  std::vector<std::string> texts;          // detokenized text of each hypothesis
};

// Lines given beside the input: one per input line, an empty line for none; `name` (the file they
// come from) and the line number (after `first_line` lines of the file) go into errors. No lines,
// or only empty ones: none given.
struct LineGuide {
  std::vector<std::string> lines;
  std::string name;
  size_t first_line = 0;

  bool given() const;
  // "name:N" for lines[index].
  std::string where(size_t index) const;
};

// What Translator::translate may be given besides the input.
struct TargetGuides {
  // Each output starts with its line's prefix (search.h).
  LineGuide prefixes{{}, "prefix"};
  // Each output contains every phrase of its line, phrases separated by tabs (search/constraints.h);
  // beam search, also at beam size 1.
  LineGuide constraints{{}, "constraints"};
};

class Translator {
 public:
  // `model`: one Seq2Seq, or an Ensemble of models that share the vocabularies. With a `shortlist`
  // (checked against the vocabularies), each batch searches over its union (search/shortlist.h),
  // and on a CPU a batch holds at most the shortlist's batch_sentences sentences.
  Translator(Ensemble model, Vocabulary source_vocabulary, Vocabulary target_vocabulary, SearchOptions search,
             BatchingOptions batching, torch::Device device, std::shared_ptr<const Shortlist> shortlist = nullptr);

  // One Translation per line, in input order. `progress(sentences_done)` runs after each batch.
  // With `guides`, each output starts with its line's prefix and contains its line's constraints;
  // a prefix or constraints that reach the line's output limit are an error naming the guide's
  // name and line. `subwords`: each line's source ids as the source vocabulary's encode() gave
  // them, which are then not encoded again (nmt serve encodes each line to check it), or none.
  std::vector<Translation> translate(const std::vector<std::string>& lines,
                                     const std::function<void(size_t)>& progress = {}, const TargetGuides& guides = {},
                                     std::vector<std::vector<int64_t>> subwords = {});

 private:
  std::vector<std::vector<int64_t>> plan_batches(const std::vector<std::vector<int64_t>>& sources,
                                                 const std::vector<int64_t>& order) const;
  SearchResult search_shortlisted(const std::vector<const std::vector<int64_t>*>& sources, const torch::Tensor& source,
                                  const torch::Tensor& lengths, const SearchOptions& options,
                                  const torch::Tensor& prefix, const BatchConstraints& constraints) const;

  Ensemble model_;
  Vocabulary source_vocabulary_;
  Vocabulary target_vocabulary_;
  SearchOptions search_;
  BatchingOptions batching_;
  torch::Device device_;
  std::shared_ptr<const Shortlist> shortlist_;
};

// A line of constraint phrases separated by tabs as target phrases (empty ones skipped; with
// `backwards`, for a right-to-left model, each phrase's tokens in its order). Throws
// std::invalid_argument starting with `where` when a phrase holds text the vocabulary lacks
// (<unk>), when they are more than kMaxConstraintPhrases, or when their tokens and the sentence's
// `prefix_tokens` reach `limit`, its output length cap.
SentenceConstraints encode_constraints(const std::string& line, const Vocabulary& target_vocabulary, bool backwards,
                                       int64_t prefix_tokens, int64_t limit, const std::string& where);

// A line as the search takes it: its source subwords' ids and EOS, or none for an empty line (or
// only whitespace); the subwords go into `translation`'s source_pieces.
std::vector<int64_t> source_ids(const std::string& line, const Vocabulary& source_vocabulary, Translation& translation);
// The same from the line's subwords as source_vocabulary.encode() gave them.
std::vector<int64_t> source_ids(std::vector<int64_t> subwords, const Vocabulary& source_vocabulary,
                                Translation& translation);
// Fills `translation`'s texts from its hypotheses, turning a right-to-left model's (`backwards`)
// around first.
void finish_translation(Translation& translation, const Vocabulary& target_vocabulary, bool backwards);

// Best hypothesis text of each translation ("" for empty lines).
std::vector<std::string> best_texts(const std::vector<Translation>& translations);

}  // namespace nmt
