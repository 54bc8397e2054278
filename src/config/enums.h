// Choices that the configuration offers, as enums parsed once from text.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nmt {

// sentencepiece model type.
enum class VocabType { kUnigram, kBpe };
// Validation metric that selects the best checkpoint and drives the schedule.
enum class Metric { kBleu, kLoss, kPerplexity };

template <typename Enum>
using EnumNames = std::vector<std::pair<std::string, Enum>>;

const EnumNames<VocabType>& vocab_type_names();
const EnumNames<Metric>& metric_names();

// The text name of a value: to_string(Metric::kBleu) == "bleu".
std::string to_string(VocabType value);
std::string to_string(Metric value);

// Parses `text` or throws std::invalid_argument naming `key` and the allowed values.
template <typename Enum>
Enum parse_enum(const EnumNames<Enum>& names, const std::string& key, const std::string& text);

// "a|b|c", for messages and help texts.
template <typename Enum>
std::string allowed_values(const EnumNames<Enum>& names) {
  std::string joined;
  for (const auto& entry : names) joined += (joined.empty() ? "" : "|") + entry.first;
  return joined;
}

// True when higher values of the metric are better.
bool higher_is_better(Metric metric);

}  // namespace nmt
