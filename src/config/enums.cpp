#include "config/enums.h"

#include <stdexcept>

namespace nmt {

const EnumNames<VocabType>& vocab_type_names() {
  static const EnumNames<VocabType> names = {{"unigram", VocabType::kUnigram}, {"bpe", VocabType::kBpe}};
  return names;
}

const EnumNames<Metric>& metric_names() {
  static const EnumNames<Metric> names = {
      {"bleu", Metric::kBleu}, {"loss", Metric::kLoss}, {"perplexity", Metric::kPerplexity}};
  return names;
}

namespace {
template <typename Enum>
std::string name_of(const EnumNames<Enum>& names, Enum value) {
  for (const auto& entry : names) {
    if (entry.second == value) return entry.first;
  }
  throw std::logic_error("enum value without a name");
}
}  // namespace

std::string to_string(VocabType value) { return name_of(vocab_type_names(), value); }
std::string to_string(Metric value) { return name_of(metric_names(), value); }

template <typename Enum>
Enum parse_enum(const EnumNames<Enum>& names, const std::string& key, const std::string& text) {
  for (const auto& entry : names) {
    if (entry.first == text) return entry.second;
  }
  throw std::invalid_argument(key + ": '" + text + "' is not one of " + allowed_values(names));
}

template VocabType parse_enum(const EnumNames<VocabType>&, const std::string&, const std::string&);
template Metric parse_enum(const EnumNames<Metric>&, const std::string&, const std::string&);

bool higher_is_better(Metric metric) { return metric == Metric::kBleu; }

}  // namespace nmt
