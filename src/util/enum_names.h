// Choices as enums with their text names, parsed once from text with an error that lists the
// allowed values.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace nmt {

template <typename Enum>
using EnumNames = std::vector<std::pair<std::string, Enum>>;

// "a|b|c", for messages and help texts.
template <typename Enum>
std::string allowed_values(const EnumNames<Enum>& names) {
  std::string joined;
  for (const auto& entry : names) joined += (joined.empty() ? "" : "|") + entry.first;
  return joined;
}

// Parses `text` or throws std::invalid_argument naming `key` and the allowed values.
template <typename Enum>
Enum parse_enum(const EnumNames<Enum>& names, const std::string& key, const std::string& text) {
  for (const auto& entry : names) {
    if (entry.first == text) return entry.second;
  }
  throw std::invalid_argument(key + ": '" + text + "' is not one of " + allowed_values(names));
}

// The text name of `value`.
template <typename Enum>
std::string name_of(const EnumNames<Enum>& names, Enum value) {
  for (const auto& entry : names) {
    if (entry.second == value) return entry.first;
  }
  throw std::logic_error("enum value without a name");
}

}  // namespace nmt
