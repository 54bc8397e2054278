// Running the nmt binary as a user would, for the command-line and fault tests.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "util/io.h"

namespace nmt::testing {

namespace fs = std::filesystem;

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh; `output` is what it writes to standard output (add 2>&1 for both).
inline CommandResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  CommandResult result;
  std::array<char, 4096> buffer{};
  size_t count;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), count);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// `environment`: "NAME=value ..." for this command only.
inline CommandResult run_nmt(const std::string& arguments, const std::string& environment = "") {
  return run_shell(environment + (environment.empty() ? "" : " ") + std::string(NMT_BINARY) + " " + arguments +
                   " 2>&1");
}

// The lines of a command's output.
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline fs::path work_directory() {
  static const fs::path dir = [] {
    fs::path path = fs::temp_directory_path() / ("nmt_cli_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
    return path;
  }();
  return dir;
}

inline std::string write_config(const std::string& name, const std::string& body) {
  const std::string path = (work_directory() / name).string();
  write_file_atomic(path, "[train]\n" + body);
  return path;
}

inline const std::string kToy = source_path("data/toy");

inline std::string tiny_train_arguments(const std::string& model_dir, int steps = 3, int validate_every = 3) {
  return "train --train-source " + kToy + "/train.src --train-target " + kToy + "/train.tgt --dev-source " + kToy +
         "/dev.src --dev-target " + kToy + "/dev.tgt --model-dir " + model_dir +
         " --vocab-size 200 --embedding-size 16 --encoder-hidden-size 8 --decoder-hidden-size 16 --attention-size 8"
         " --max-steps " +
         std::to_string(steps) + " --validate-every " + std::to_string(validate_every) +
         " --batch-tokens 400 --threads 1 --byte-fallback false";
}

}  // namespace nmt::testing
