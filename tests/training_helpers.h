// Training runs for tests: a tiny configuration on the first lines of the toy corpus.
#pragma once

#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "helpers.h"
#include "model/seq2seq.h"
#include "text/corpus.h"
#include "util/io.h"

namespace nmt::testing {

inline std::filesystem::path fresh_directory(const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("nmt_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The first `count` lines of a toy corpus file, copied to `dir`.
inline std::string head_of(const std::string& file, size_t count, const std::filesystem::path& dir) {
  std::vector<std::string> lines = read_lines(source_path("data/toy/" + file));
  std::string text;
  for (size_t i = 0; i < count && i < lines.size(); ++i) text += lines[i] + "\n";
  const std::string path = (dir / file).string();
  write_file_atomic(path, text);
  return path;
}

inline TrainConfig tiny_config(const std::filesystem::path& dir) {
  TrainConfig config;
  config.train_source = head_of("train.src", 200, dir);
  config.train_target = head_of("train.tgt", 200, dir);
  config.dev_source = head_of("dev.src", 20, dir);
  config.dev_target = head_of("dev.tgt", 20, dir);
  config.model_dir = (dir / "model").string();
  config.vocab_size = 120;
  config.byte_fallback = false;  // no room for the 256 bytes
  config.model = tiny_model_options("additive");
  config.batch_tokens = 600;
  config.validate_every = 4;
  config.log_every = 2;
  config.max_steps = 6;
  config.threads = 1;
  return config;
}

// Each parameter of `a` equal to `b`'s, element for element (a resumed run against an
// uninterrupted one, two runs of one seed).
inline void check_same_parameters(const Seq2Seq& a, const Seq2Seq& b) {
  const auto pa = a->parameters(), pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
}

}  // namespace nmt::testing
