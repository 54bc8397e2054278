#include "model/scorers/registry.h"

#include <stdexcept>

namespace nmt {

// Defined in this folder, one file each.
ScorerEntry additive_scorer_entry();
ScorerEntry dot_scorer_entry();
ScorerEntry general_scorer_entry();
ScorerEntry cosine_scorer_entry();

const std::vector<ScorerEntry>& scorer_registry() {
  static const std::vector<ScorerEntry> entries = {additive_scorer_entry(), dot_scorer_entry(), general_scorer_entry(),
                                                   cosine_scorer_entry()};
  return entries;
}

std::vector<std::string> attention_names() {
  std::vector<std::string> names;
  for (const ScorerEntry& entry : scorer_registry()) names.push_back(entry.name);
  names.push_back(kNoAttention);
  return names;
}

const ScorerEntry& find_scorer(const std::string& name) {
  for (const ScorerEntry& entry : scorer_registry()) {
    if (entry.name == name) return entry;
  }
  std::string allowed;
  for (const std::string& known : attention_names()) allowed += (allowed.empty() ? "" : "|") + known;
  throw std::invalid_argument("attention: '" + name + "' is not one of " + allowed);
}

}  // namespace nmt
