#include "config/fields.h"

#include <stdexcept>

namespace nmt {

const EnumNames<VocabType>& names_for(const VocabType&) { return vocab_type_names(); }
const EnumNames<Metric>& names_for(const Metric&) { return metric_names(); }

void parse_entries(CLI::App& app, const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<std::string> args;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {  // CLI11 reads a reversed vector
    args.push_back(it->second);
    args.push_back("--" + it->first);
  }
  try {
    app.parse(args);
  } catch (const CLI::ParseError& error) {
    throw std::runtime_error(std::string("stored configuration is invalid: ") + error.what());
  }
}

void require(bool condition, const std::string& key, const std::string& message) {
  if (!condition) throw std::invalid_argument(key + ": " + message);
}

}  // namespace nmt
