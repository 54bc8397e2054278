#include "config/translate_options.h"

#include <stdexcept>
#include <string>

namespace nmt {

void validate(const SearchOptions& options) {
  if (options.beam_size < 1) throw std::invalid_argument("--beam-size must be at least 1");
  if (options.length_penalty < 0) throw std::invalid_argument("--length-penalty must be >= 0 (0 = none)");
  if (options.max_length_ratio <= 0) throw std::invalid_argument("--max-length-ratio must be > 0");
  if (options.max_length < 1) throw std::invalid_argument("--max-length must be at least 1");
  if (options.n_best < 1 || options.n_best > options.beam_size) {
    throw std::invalid_argument("--n-best must be between 1 and --beam-size (" +
                                std::to_string(options.beam_size) + ")");
  }
}

void validate(const BatchingOptions& options) {
  if (options.batch_size < 1) throw std::invalid_argument("--batch-size must be at least 1");
}

}  // namespace nmt
