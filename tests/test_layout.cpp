// The source tree's shape: the folders of src/ include each other without a cycle; in src/model/
// the execution paths are folders of their own that only the functions choosing among them
// include; a device type is told apart in four files alone; the CPU's instruction sets are read
// in src/kernels/ alone; main.cpp only parses and
// dispatches (it includes no model, search, text or metric code, and each command is a file of its
// own in src/cli/); and test names are ones CTest keeps whole.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "helpers.h"

namespace fs = std::filesystem;

namespace {

std::string file_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The folders of src/ that a file's `#include "folder/..."` lines name.
std::set<std::string> included_folders(const fs::path& file) {
  const std::string content = file_text(file);
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

// Every file under src/, as its path relative to src/ ("model/decoder.cpp") and its text.
std::vector<std::pair<std::string, std::string>> source_files() {
  const fs::path source = nmt::testing::source_path("src");
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& entry : fs::recursive_directory_iterator(source)) {
    if (entry.is_regular_file()) {
      files.emplace_back(fs::relative(entry.path(), source).generic_string(), file_text(entry.path()));
    }
  }
  return files;
}

}  // namespace

TEST_CASE("src/model/: each execution path is a folder that only the functions choosing a path include", "[layout]") {
  // The passes beside the architecture (model/*.h, model/scorers/): the reference, step by step;
  // the fused CPU pass; the GPU graph pass. None builds on another.
  const std::set<std::string> paths = {"model/reference", "model/fused_cpu", "model/gpu_graph"};
  // The files that choose among them: DecoderImpl::teacher_forced_path (the decoder's training
  // pass) and BiGruImpl::forward (the encoder's recurrence: step by step, both directions fused on
  // the CPU, cuDNN on a GPU).
  const std::set<std::string> fronts = {"model/decoder.cpp", "model/bigru.cpp"};
  static const std::regex path_include(R"(#include "(model/[a-z_]+)/)");
  // Every include names its file from src/ ("model/fused_cpu/..."), so that this test sees it.
  static const std::regex relative_include(R"(#include "(reference|fused_cpu|gpu_graph|linear|ops|scorers)/)");
  std::map<std::string, std::set<std::string>> included_by_fronts;
  for (const auto& [file, text] : source_files()) {
    INFO(file);
    CHECK_FALSE(std::regex_search(text, relative_include));
    const std::string folder = fs::path(file).parent_path().generic_string();
    for (auto match = std::sregex_iterator(text.begin(), text.end(), path_include); match != std::sregex_iterator();
         ++match) {
      const std::string included = (*match)[1].str();
      if (paths.count(included) == 0 || included == folder) continue;
      INFO(file << " includes " << included << "/");
      CHECK(paths.count(folder) == 0);  // a path does not build on another
      CHECK(fronts.count(file) == 1);   // only a front chooses a path
      included_by_fronts[file].insert(included);
    }
  }
  // The walk saw the choice: the decoder's front includes all three.
  CHECK(included_by_fronts["model/decoder.cpp"] == paths);
}

TEST_CASE("a device type is told apart in four files of src/ alone, which the rest asks", "[layout]") {
  // The fronts (docs/architecture.md, "Where the device is chosen"): a new choice by device is a
  // question in util/device_rules.h, not a test of the device where it is needed.
  const std::map<std::string, const char*> fronts = {
      {"kernels/dispatch.cpp", "the CPU kernels' front: use_kernel, run_on, on_cpu"},
      {"util/device_rules.cpp", "every other choice by device: queues_work, batch_workers, ..."},
      {"util/runtime.cpp", "the mechanics: to_device, autocast, random states, read_async"},
      {"util/cuda_graph.cpp", "GPU streams and CUDA graphs"},
  };
  // is_cuda(), is_cpu(), a comparison with a device type either way round, CUDA's availability.
  static const std::regex device_branch(
      R"(is_cuda\(\)|is_cpu\(\)|[=!]=\s*(torch::|c10::|at::)?(DeviceType::)?k?(CPU|CUDA)\b)"
      R"(|\b(torch::|c10::|at::)?(DeviceType::)?k?(CPU|CUDA)\s*[=!]=|cuda::is_available)");
  std::set<std::string> branching;
  for (const auto& [file, text] : source_files()) {
    std::smatch match;
    if (!std::regex_search(text, match, device_branch)) continue;
    branching.insert(file);
    INFO(file << " tells devices apart (" << match.str()
              << "): ask util/device_rules.h (or kernels::run_on) instead, or add the question there");
    CHECK(fronts.count(file) == 1);
  }
  for (const auto& [front, what] : fronts) {
    INFO(front << " (" << what << ") no longer tells devices apart: take it off the list and the page");
    CHECK(branching.count(front) == 1);
  }
}

TEST_CASE("the CPU's instruction sets are read and a kernel chosen by them only in src/kernels/", "[layout]") {
  // cpuid and the compiler's CPU checks read the CPU; kernel_level() or *_kernels_available() are
  // what a kernel variant is chosen by: kernels/dispatch.h chooses for every caller (use_kernel,
  // int8_kernel, packed_kernel, cpu_has_bf16). Outside it, the level is only checked and shown.
  static const std::regex reads_cpu(R"(cpuid|__builtin_cpu_supports|__get_cpuid|xgetbv|_kernels_available\(\))");
  static const std::regex reads_level(R"(kernel_level\(\))");
  const std::set<std::string> shows_the_level = {
      "cli/program.cpp",  // an unknown NMT_KERNELS stops the program before any work
      "train/setup.cpp",  // the log's line of the run's set-up
  };
  bool seen_kernels = false;
  for (const auto& [file, text] : source_files()) {
    if (file.rfind("kernels/", 0) == 0) {
      seen_kernels = seen_kernels || (std::regex_search(text, reads_cpu) && std::regex_search(text, reads_level));
      continue;
    }
    std::smatch match;
    const bool reads = std::regex_search(text, match, reads_cpu) ||
                       (shows_the_level.count(file) == 0 && std::regex_search(text, match, reads_level));
    INFO(file << (reads ? ": " + match.str() : std::string()));
    CHECK_FALSE(reads);
  }
  CHECK(seen_kernels);  // the pattern finds what it looks for
}

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
