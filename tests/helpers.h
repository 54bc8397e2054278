// Small models and batches for tests: every tensor tiny, every generator seeded.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "model/options.h"
#include "model/scorers/registry.h"
#include "model/seq2seq.h"
#include "test_paths.h"
#include "text/special_tokens.h"

namespace nmt::testing {

// A case that cannot run here (no AVX2 on this CPU, a data set not fetched) says so and ends, at
// the top of its TEST_CASE, before any SECTION or check:
//   if (!kernels::avx2_kernels_available()) return skip_case("no AVX2 on this CPU");
// The line it prints on standard output starts with kSkipMarker, which CTest looks for
// (SKIP_REGULAR_EXPRESSION in CMakeLists.txt) to report the case as skipped instead of passed.
// CTest reports a case whose output holds the marker as skipped whatever else it did, so nothing
// may be checked before the skip. (Catch2 2.13 has no SKIP of its own.)
inline constexpr const char* kSkipMarker = "NMT_TEST_SKIPPED";
inline void skip_case(const std::string& reason) { std::cout << kSkipMarker << ": " << reason << std::endl; }

// Polls `condition` every `interval` until it holds or `seconds` have passed: whether it held.
// For waiting on another thread or process, instead of a sleep that guesses how long it takes.
template <typename Condition>
bool wait_until(Condition condition, double seconds,
                std::chrono::milliseconds interval = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(interval);
  }
  return true;
}

// The suffix of an attention type that switches coverage on (all_attention_types).
inline const std::string kWithCoverage = "+coverage";

// `attention`: a scorer's name, "none", or "additive+coverage".
inline ModelOptions tiny_model_options(const std::string& attention, int64_t decoder_hidden = 12) {
  ModelOptions options;
  const size_t suffix = attention.find(kWithCoverage);
  options.coverage = suffix != std::string::npos;
  options.embedding_size = 8;
  options.encoder_hidden_size = 6;  // encoder states 12 = decoder size: dot/cosine without a key map
  options.encoder_layers = 1;
  options.decoder_hidden_size = decoder_hidden;
  options.decoder_layers = 1;
  options.attention = attention.substr(0, suffix);
  options.attention_size = 10;
  options.attention_heads = 2;  // dividing 10 and the encoder states' sizes the tests use
  options.dropout = 0.0;
  return options;
}

// Every registered scorer's name (model/scorers/registry.h).
// Attention options with the model's defaults (ModelOptions) and these sizes.
inline AttentionOptions attention_options(const std::string& scorer, int64_t query_size, int64_t key_size,
                                          int64_t attention_size, double cosine_sharpness) {
  AttentionOptions options = ModelOptions{}.attention_options();
  options.scorer = scorer;
  options.query_size = query_size;
  options.key_size = key_size;
  options.attention_size = attention_size;
  options.cosine_sharpness = cosine_sharpness;
  return options;
}

inline std::vector<std::string> all_scorer_names() {
  std::vector<std::string> names;
  for (const ScorerEntry& entry : scorer_registry()) names.push_back(entry.name);
  return names;
}

// Every registered scorer, then "none" (model/scorers/registry.h), then additive with coverage.
inline const std::vector<std::string>& all_attention_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> names = attention_names();
    names.push_back("additive" + kWithCoverage);
    return names;
  }();
  return types;
}

// A padded batch [B, S] of random ids >= 4 (no specials) ending in EOS, with the given lengths
// (EOS included).
inline std::pair<torch::Tensor, torch::Tensor> random_source(const std::vector<int64_t>& lengths, int64_t vocab,
                                                             uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t max_length = *std::max_element(lengths.begin(), lengths.end());
  torch::Tensor source = torch::full({static_cast<int64_t>(lengths.size()), max_length}, kPadId, torch::kInt64);
  for (size_t b = 0; b < lengths.size(); ++b) {
    const int64_t length = lengths[b];
    source[b].narrow(0, 0, length - 1).copy_(torch::randint(4, vocab, {length - 1}, torch::kInt64));
    source[b][length - 1] = kEosId;
  }
  return {source, torch::tensor(lengths, torch::kInt64)};
}

inline std::string source_path(const std::string& relative) { return std::string(NMT_SOURCE_DIR) + "/" + relative; }

}  // namespace nmt::testing
