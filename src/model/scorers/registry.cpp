#include "model/scorers/registry.h"

#include <stdexcept>

namespace nmt {

// Defined in this folder, one file each.
ScorerEntry additive_scorer_entry();
ScorerEntry dot_scorer_entry();
ScorerEntry general_scorer_entry();
ScorerEntry cosine_scorer_entry();
ScorerEntry scaled_dot_scorer_entry();
ScorerEntry location_scorer_entry();
ScorerEntry local_p_scorer_entry();
ScorerEntry local_m_scorer_entry();
ScorerEntry multi_head_scorer_entry();

const std::vector<ScorerEntry>& scorer_registry() {
  static const std::vector<ScorerEntry> entries = {
      additive_scorer_entry(), dot_scorer_entry(),        general_scorer_entry(),
      cosine_scorer_entry(),   scaled_dot_scorer_entry(), location_scorer_entry(),
      local_p_scorer_entry(),  local_m_scorer_entry(),    multi_head_scorer_entry()};
  return entries;
}

std::vector<std::string> content_scorer_names() {
  std::vector<std::string> names;
  for (const ScorerEntry& entry : scorer_registry()) {
    if (entry.content) names.push_back(entry.name);
  }
  return names;
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
