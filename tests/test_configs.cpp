// The configurations shipped in configs/: each names every training key, with the value that
// `nmt train --dump-config` prints for it, and says what each key (or group of keys) does.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cli_helpers.h"

using namespace nmt::testing;

namespace {

struct ConfigLine {
  int number = 0;  // 1-based
  std::string key;
  std::string value;       // as written, without a trailing comment
  bool commented = false;  // a comment line stands directly above this key or its group of keys
};

// The key lines of a TOML file's [train] section.
std::vector<ConfigLine> key_lines(const std::string& path) {
  std::ifstream in(path);
  static const std::regex key_line(R"(^([a-z0-9-]+) = (.*?)\s*(#.*)?$)");
  std::vector<ConfigLine> lines;
  std::string text;
  bool group_commented = false;
  for (int number = 1; std::getline(in, text); ++number) {
    std::smatch match;
    if (std::regex_match(text, match, key_line)) {
      lines.push_back({number, match[1].str(), match[2].str(), group_commented});
    } else {
      group_commented = !text.empty() && text.front() == '#';  // a blank line or a section ends a group
    }
  }
  return lines;
}

// key -> value, as `--dump-config` prints them.
std::map<std::string, std::string> dumped(const std::string& config) {
  const CommandResult result = run_nmt("train --config " + config + " --dump-config");
  REQUIRE(result.status == 0);
  std::map<std::string, std::string> values;
  std::istringstream lines(result.output);
  static const std::regex key_line(R"(^([a-z0-9-]+) = (.*)$)");
  std::string text;
  while (std::getline(lines, text)) {
    std::smatch match;
    if (std::regex_match(text, match, key_line)) values[match[1].str()] = match[2].str();
  }
  return values;
}

// The same value written two ways (1e-5 and 0.00001, 60 and 60.0) is the same value.
bool same_value(const std::string& written, const std::string& dumped) {
  if (written == dumped) return true;
  try {
    size_t used_written = 0;
    size_t used_dumped = 0;
    const double a = std::stod(written, &used_written);
    const double b = std::stod(dumped, &used_dumped);
    return used_written == written.size() && used_dumped == dumped.size() && a == b;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

TEST_CASE("configs: every file names every key with its dumped value, each key under a comment", "[cli]") {
  const fs::path configs = source_path("configs");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(configs)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    const std::string path = entry.path().string();
    INFO(path);
    const std::map<std::string, std::string> effective = dumped(path);
    REQUIRE(effective.size() > 40);
    std::map<std::string, std::string> written;
    for (const ConfigLine& line : key_lines(path)) {
      INFO("line " << line.number << ": " << line.key);
      CHECK(line.commented);
      REQUIRE(effective.count(line.key) == 1);
      CHECK(same_value(line.value, effective.at(line.key)));
      written[line.key] = line.value;
    }
    for (const auto& [key, value] : effective) {
      INFO("a key the file does not name: " << key << " = " << value);
      CHECK(written.count(key) == 1);
    }
  }
  CHECK(files >= 2);
}
