// The source tree's shape: the folders of src/ include each other without a cycle, and main.cpp
// only parses and dispatches (it includes no model, search, text or metric code, and each command
// is a file of its own in src/cli/), and test names are ones CTest keeps whole.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"

namespace fs = std::filesystem;

namespace {

// The folders of src/ that a file's `#include "folder/..."` lines name.
std::set<std::string> included_folders(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  static const std::regex include_line(R"(#include "([a-z_]+)/)");
  std::set<std::string> folders;
  for (auto match = std::sregex_iterator(content.begin(), content.end(), include_line); match != std::sregex_iterator();
       ++match) {
    folders.insert((*match)[1].str());
  }
  return folders;
}

// folder -> the other folders its files include ("." for the files directly in src/).
std::map<std::string, std::set<std::string>> folder_graph() {
  const fs::path source = nmt::testing::source_path("src");
  std::map<std::string, std::set<std::string>> graph;
  for (const auto& entry : fs::recursive_directory_iterator(source)) {
    if (!entry.is_regular_file()) continue;
    const fs::path relative = fs::relative(entry.path(), source);
    const std::string folder = relative.has_parent_path() ? relative.begin()->string() : ".";
    for (const std::string& included : included_folders(entry.path())) {
      if (included != folder) graph[folder].insert(included);
    }
  }
  return graph;
}

}  // namespace

TEST_CASE("the folders of src/ include each other without a cycle", "[layout]") {
  const auto graph = folder_graph();
  REQUIRE(graph.count("train") == 1);  // the walk found the tree
  std::vector<std::string> path;
  std::set<std::string> finished;
  std::function<void(const std::string&)> visit = [&](const std::string& folder) {
    for (const auto& on_path : path) {
      if (on_path == folder) {
        std::string cycle;
        for (const auto& step : path) cycle += step + " -> ";
        FAIL("include cycle between folders: " << cycle << folder);
      }
    }
    if (finished.count(folder) != 0) return;
    path.push_back(folder);
    if (graph.count(folder) != 0) {
      for (const auto& next : graph.at(folder)) visit(next);
    }
    path.pop_back();
    finished.insert(folder);
  };
  for (const auto& [folder, unused] : graph) visit(folder);
}

TEST_CASE("main.cpp includes no model, search, text or metric header directly", "[layout]") {
  const std::set<std::string> folders = included_folders(nmt::testing::source_path("src/main.cpp"));
  for (const char* forbidden : {"model", "search", "text", "eval"}) {
    INFO(forbidden);
    CHECK(folders.count(forbidden) == 0);
  }
}

TEST_CASE("main.cpp parses and dispatches in at most 60 lines, each command is a file of src/cli/", "[layout]") {
  std::ifstream main_file(nmt::testing::source_path("src/main.cpp"));
  int lines = 0;
  for (std::string line; std::getline(main_file, line);) ++lines;
  CHECK(lines > 0);
  CHECK(lines <= 60);
  for (const char* command : {"train", "prepare", "translate", "evaluate", "serve", "average"}) {
    INFO(command);
    CHECK(fs::exists(nmt::testing::source_path(std::string("src/cli/") + command + ".cpp")));
  }
}

TEST_CASE("no test case's name holds a semicolon, which CTest would cut it at", "[layout]") {
  // catch_discover_tests registers names as a CMake list: "a; b" becomes the cases "a" and " b",
  // which match nothing, and Catch passes a run in which no test ran.
  static const std::regex test_name(R"(TEST_CASE\(\s*"([^"]*)\")");
  for (const auto& entry : fs::recursive_directory_iterator(nmt::testing::source_path("tests"))) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string content = text.str();
    for (auto match = std::sregex_iterator(content.begin(), content.end(), test_name); match != std::sregex_iterator();
         ++match) {
      INFO(entry.path().string() << ": " << (*match)[1].str());
      CHECK((*match)[1].str().find(';') == std::string::npos);
    }
  }
}
