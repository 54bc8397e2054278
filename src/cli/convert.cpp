// nmt convert: rewrites checkpoints of the format before (LibTorch archives) in the current one
// (inference/checkpoint_format.h), through the converter that refuses what our writer never wrote
// (inference/legacy_checkpoint.h).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "config/model_fields.h"
#include "inference/checkpoint_format.h"
#include "inference/legacy_checkpoint.h"
#include "inference/model.h"
#include "util/format.h"
#include "util/io.h"

namespace nmt::cli {
namespace {

namespace fs = std::filesystem;

// The files to convert: each path's own, or a directory's *.ckpt files.
std::vector<std::string> checkpoint_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (fs::is_directory(path)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file() && entry.path().extension() == ".ckpt") found.push_back(entry.path().string());
      }
      if (found.empty()) throw FileNotFound(path + ": no *.ckpt files in this directory");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(path)) {
      files.push_back(path);
    } else {
      throw FileNotFound(path + ": no such checkpoint or model directory");
    }
  }
  return files;
}

std::string megabytes(uintmax_t bytes) { return format_fixed(static_cast<double>(bytes) / 1e6, 1) + " MB"; }

// Converts one file in place; returns what became of it.
std::string convert_file(const std::string& path) {
  const std::string bytes = read_file(path);
  if (!is_legacy_checkpoint(bytes)) {
    parse_checkpoint(bytes, path);  // a damaged or foreign file gets its message
    return path + ": already in the current format";
  }
  TensorFile converted;
  try {
    converted = convert_legacy_checkpoint(bytes);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(path + ": " + error.what() + "; the file is left as it was");
  }
  // The result must load as a model before it replaces anything.
  const std::string written = converted.serialize();
  const TensorFile check = parse_checkpoint(written, path);
  with_checkpoint_errors(
      path, [&] { read_model(check, model_options_from_entries(read_config_entries(check)), path, torch::kCPU); });
  write_file_atomic(path, written);
  return path + ": converted (" + megabytes(bytes.size()) + " as a LibTorch archive, " + megabytes(written.size()) +
         " now)";
}

}  // namespace

Command add_convert(CLI::App& program) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* command = program.add_subcommand(
      "convert",
      "rewrite checkpoints of the older format (LibTorch archives, which can hold code) in the current one, in place");
  command->add_option("paths", *paths, "checkpoint files, or model directories (each *.ckpt in them)")->required();
  return {command, [paths] {
            for (const std::string& file : checkpoint_files(*paths)) std::cout << convert_file(file) << "\n";
            return 0;
          }};
}

}  // namespace nmt::cli
