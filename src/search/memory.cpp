#include "search/memory.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "search/search.h"
#include "text/special_tokens.h"

namespace nmt {
namespace {

constexpr int64_t kFloat = 4, kLong = 8, kMiB = 1 << 20;

// One member's floats per row: the encoder output and scorer keys copied to the row (twice while a
// reorder replaces them), the scorer's [S, K_a] temporaries, the coverage and step attention, the
// decoder state, and the logits, log-probabilities and their softmax temporary.
int64_t member_floats_per_row(const ModelOptions& options, int64_t source_length, int64_t vocab) {
  const int64_t states = 2 * options.encoder_hidden_size;
  const int64_t keys = std::max(options.attention_size, states);
  const int64_t per_source_token = 2 * (states + keys) + 2 * keys + 2;
  const int64_t decoder = (options.decoder_layers + 1) * options.decoder_hidden_size;
  return source_length * per_source_token + decoder + states + 3 * vocab;
}

}  // namespace

int64_t largest_beam(int64_t target_vocab_size, const SearchOptions& options) {
  const int64_t banned = 2 + (options.ban_unk ? 1 : 0);  // pad, BOS (and <unk>)
  return std::max<int64_t>(1, target_vocab_size - banned);
}

void check_beam_fits_vocabulary(int64_t target_vocab_size, const SearchOptions& options) {
  const int64_t largest = largest_beam(target_vocab_size, options);
  if (options.beam_size > largest) {
    throw std::invalid_argument("--beam-size " + std::to_string(options.beam_size) + " is larger than the " +
                                std::to_string(largest) + " tokens the model can produce (target vocabulary of " +
                                std::to_string(target_vocab_size) + "), so no beam can be filled: use at most " +
                                std::to_string(largest));
  }
}

int64_t search_bytes_per_row(const Ensemble& model, int64_t source_length, int64_t target_vocab_size,
                             const SearchOptions& options) {
  int64_t floats = target_vocab_size;  // the members' mean
  for (const Seq2Seq& member : model.members()) {
    floats += member_floats_per_row(member->options(), source_length, target_vocab_size);
  }
  const int64_t cap = max_output_length(source_length, options);
  const int64_t candidates = 2 * options.beam_size * (kFloat + 2 * kLong);  // top-k values, ids, scores
  const int64_t tokens = 2 * cap * kLong;                                   // history, and its next copy
  // The attention history, its next copy, and the finished hypotheses' own copies.
  const int64_t attention = options.return_attention ? 3 * cap * source_length * kFloat : 0;
  return floats * kFloat + candidates + tokens + attention;
}

int64_t sentence_search_bytes(const Ensemble& model, int64_t source_length, int64_t target_vocab_size,
                              const SearchOptions& options) {
  return options.beam_size * search_bytes_per_row(model, source_length, target_vocab_size, options);
}

std::vector<std::vector<int64_t>> split_for_memory(const std::vector<int64_t>& batch,
                                                   const std::vector<int64_t>& source_lengths, const Ensemble& model,
                                                   int64_t target_vocab_size, const SearchOptions& options,
                                                   int64_t max_bytes) {
  std::vector<std::vector<int64_t>> pieces;
  for (size_t start = 0; start < batch.size();) {
    // The first sentence of a piece is its longest, so it sets the piece's cost per row.
    const int64_t length = source_lengths[batch[start]];
    const int64_t sentence_bytes = sentence_search_bytes(model, length, target_vocab_size, options);
    if (sentence_bytes > max_bytes) {
      throw std::invalid_argument(
          "one sentence of " + std::to_string(length) + " subwords at --beam-size " +
          std::to_string(options.beam_size) + " needs about " + std::to_string(sentence_bytes / kMiB + 1) +
          " MiB for its search, more than " + "--max-search-memory " + std::to_string(max_bytes / kMiB) +
          ": lower --beam-size, --max-output-length or --max-length-ratio, or raise --max-search-memory");
    }
    const auto fits = static_cast<size_t>(max_bytes / sentence_bytes);
    const size_t end = std::min(batch.size(), start + fits);
    pieces.emplace_back(batch.begin() + static_cast<std::ptrdiff_t>(start),
                        batch.begin() + static_cast<std::ptrdiff_t>(end));
    start = end;
  }
  return pieces;
}

}  // namespace nmt
