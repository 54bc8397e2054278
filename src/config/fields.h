// What the key lists of the configuration (visit_fields in train_config.cpp, visit_model_fields in
// model_fields.h, visit_translate_fields in translate_options.cpp) are walked with: the visitors
// that declare command-line options, write "key = value" entries and TOML. A list calls
// visitor(key, field, help, on_resume) once per key; a field is a string, bool, number, enum or
// Choice (a string from a fixed list).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/enums.h"
#include "text/vocabulary.h"
#include "util/format.h"

namespace nmt {

// Whether a key may change when `nmt train --resume` continues a run.
enum class OnResume {
  kMayChange,  // schedule, limits, paths, threads...
  kFixed,      // fixes the vocabulary, the network's shapes or how epochs are cut into batches
};

// A string field whose value is one of `allowed` (e.g. the attention scorers of the registry).
template <typename Text>
struct Choice {
  Text& value;
  std::vector<std::string> allowed;
};

// A boolean command-line flag (--ban-unk), not an option taking a value.
struct Flag {
  bool& value;
};

template <typename T>
struct IsChoice : std::false_type {};
template <typename Text>
struct IsChoice<Choice<Text>> : std::true_type {};

// Parses "--key value" for every entry into the options of `app` (the values of stored entries);
// std::runtime_error when one does not parse.
void parse_entries(CLI::App& app, const std::vector<std::pair<std::string, std::string>>& entries);

// Throws std::invalid_argument("key: message") unless `condition`.
void require(bool condition, const std::string& key, const std::string& message);

const EnumNames<VocabType>& names_for(const VocabType&);
const EnumNames<Metric>& names_for(const Metric&);

// Declares each key as a command-line option --key. Given twice (a script's default, then the
// user's override), the last one counts.
struct OptionAdder {
  CLI::App& app;

  template <typename Field>
  void operator()(const std::string& key, Field&& field, const std::string& help, OnResume = OnResume::kMayChange) {
    using Plain = std::decay_t<Field>;
    if constexpr (std::is_same_v<Plain, Flag>) {
      app.add_flag("--" + key, field.value, help);
    } else if constexpr (IsChoice<Plain>::value) {
      std::string joined;
      for (const auto& name : field.allowed) joined += (joined.empty() ? "" : "|") + name;
      app.add_option("--" + key, field.value, help + " (" + joined + ")")
          ->check(CLI::IsMember(field.allowed))
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else if constexpr (std::is_enum_v<Plain>) {
      const auto& names = names_for(field);
      std::vector<std::string> allowed;
      for (const auto& entry : names) allowed.push_back(entry.first);
      app.add_option_function<std::string>(
             "--" + key, [&field, &names, key](const std::string& text) { field = parse_enum(names, key, text); },
             help + " (" + allowed_values(names) + ")")
          ->check(CLI::IsMember(allowed))
          ->default_str(to_string(field))
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else if constexpr (std::is_floating_point_v<Plain>) {
      app.add_option("--" + key, field, help)
          ->check(CLI::Validator(
              [](std::string& text) {
                char* end = nullptr;
                const double value = std::strtod(text.c_str(), &end);
                return std::isfinite(value) ? std::string() : "must be a finite number, not " + text;
              },
              "FINITE"))
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      app.add_option("--" + key, field, help)
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
};

// The value of a field as on the command line.
template <typename Field>
std::string field_text(const Field& field) {
  if constexpr (IsChoice<Field>::value) {
    return field.value;
  } else if constexpr (std::is_enum_v<Field>) {
    return to_string(field);
  } else if constexpr (std::is_same_v<Field, bool>) {
    return field ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<Field>) {
    return format_double(field);
  } else if constexpr (std::is_integral_v<Field>) {
    return std::to_string(field);
  } else {
    return field;
  }
}

// (key, value) pairs in declaration order.
struct EntryWriter {
  std::vector<std::pair<std::string, std::string>> entries;

  template <typename Field>
  void operator()(const std::string& key, const Field& field, const std::string&, OnResume = OnResume::kMayChange) {
    entries.emplace_back(key, field_text(field));
  }
};

// The keys a resumed run may not change.
struct FixedKeyCollector {
  std::vector<std::string> keys;

  template <typename Field>
  void operator()(const std::string& key, const Field&, const std::string&, OnResume on_resume = OnResume::kMayChange) {
    if (on_resume == OnResume::kFixed) keys.push_back(key);
  }
};

// "# help\nkey = value" for each key; strings and choices quoted.
struct TomlWriter {
  std::ostringstream out;

  template <typename Field>
  void operator()(const std::string& key, const Field& field, const std::string& help,
                  OnResume = OnResume::kMayChange) {
    const std::string value = field_text(field);
    out << "# " << help << "\n" << key << " = ";
    if constexpr (std::is_enum_v<Field> || std::is_same_v<Field, std::string> || IsChoice<Field>::value) {
      out << '"';
      for (char c : value) {
        if (c == '"' || c == '\\') out << '\\';
        out << c;
      }
      out << '"';
    } else {
      out << value;
    }
    out << "\n";
  }
};

}  // namespace nmt
