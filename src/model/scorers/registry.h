// The attention scorers by name. Each scorer is one file in this folder that defines its module
// (a ScorerImpl, model/attention.h) and a ScorerEntry; registry.cpp lists the entries. Adding a
// scorer: its file, and one line in registry.cpp. The configuration, the tests and the benchmark
// take their lists from here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/attention.h"

namespace nmt {

// A scorer's matrix-product arithmetic in multiply-adds, for the benchmark's FLOP count.
struct ScorerArithmetic {
  double per_key = 0;       // making one key from an encoder state (once per source position)
  double per_query = 0;     // projecting the query (once per decoder step)
  double per_position = 0;  // scoring the query against one key (per step and source position)
};

// The arithmetic of a scorer that takes the encoder states as keys (mapped to the query size by one
// matrix when the sizes differ) and scores with one dot product per position: dot, cosine.
inline ScorerArithmetic state_key_arithmetic(const AttentionOptions& options) {
  const auto query = static_cast<double>(options.query_size), key = static_cast<double>(options.key_size);
  return {key == query ? 0.0 : key * query, 0.0, query};
}

// The arithmetic of the additive form v^T tanh(W s + U h_j): additive, multi-head.
inline ScorerArithmetic additive_arithmetic(const AttentionOptions& options) {
  const auto attention = static_cast<double>(options.attention_size);
  return {static_cast<double>(options.key_size) * attention, static_cast<double>(options.query_size) * attention,
          attention};
}

struct ScorerEntry {
  std::string name;     // the value of the `attention` key
  std::string formula;  // score(s, h_j) and its source, for help texts
  std::function<std::shared_ptr<ScorerImpl>(const AttentionOptions&)> make;
  std::function<ScorerArithmetic(const AttentionOptions&)> arithmetic;
  bool content = true;  // scores what a position holds, one score per position: local-scorer may name it
};

// Every registered scorer, in registration order.
const std::vector<ScorerEntry>& scorer_registry();

// The entry named `name`; std::invalid_argument listing the names when there is none.
const ScorerEntry& find_scorer(const std::string& name);

// The values the `attention` key takes: every scorer's name, then kNoAttention.
std::vector<std::string> attention_names();

// The values the `local-scorer` key takes: the content scorers' names.
std::vector<std::string> content_scorer_names();

}  // namespace nmt
