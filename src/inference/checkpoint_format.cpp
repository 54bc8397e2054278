#include "inference/checkpoint_format.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "inference/legacy_checkpoint.h"
#include "util/io.h"

namespace nmt {
void write_checkpoint_header(TensorFile& file, const ConfigEntries& entries) {
  file.set_metadata("format", kCheckpointFormatName);
  file.set_metadata("version", std::to_string(kCheckpointVersion));
  // Values never contain newlines or tabs.
  std::string text;
  for (const auto& [key, value] : entries) text += key + "\t" + value + "\n";
  file.add_bytes(kConfigRecord, text);
}

TensorFile parse_checkpoint(const std::string& bytes, const std::string& what, const std::string& remedy) {
  TensorFile file;
  try {
    file = TensorFile::parse(bytes);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(what + ": a damaged checkpoint (" + error.what() + "); " + remedy);
  }
  if (file.metadata("format") != kCheckpointFormatName)
    throw std::runtime_error(what + ": not an nmt checkpoint; " + remedy);
  if (file.metadata("version") != std::to_string(kCheckpointVersion)) {
    throw std::runtime_error(what + ": checkpoint format version " + file.metadata("version").substr(0, 20) +
                             ", this build reads version " + std::to_string(kCheckpointVersion));
  }
  return file;
}

std::string replaced_run_hint(const std::string& model_dir) {
  const std::filesystem::path aside = std::filesystem::path(model_dir) / kReplacedRunDir;
  std::error_code error;
  for (const char* name : {kBestCheckpoint, kLastCheckpoint}) {
    if (std::filesystem::exists(aside / name, error)) {
      return "; " + aside.string() + "/ still holds the model an --overwrite run replaced: move its files back into " +
             model_dir + " to use it";
    }
  }
  return "";
}

TensorFile open_checkpoint(const std::string& path, const std::string& remedy) {
  if (!file_exists(path)) {
    const std::string hint = replaced_run_hint(std::filesystem::path(path).parent_path().string());
    throw FileNotFound(path + ": checkpoint not found (train a model first, or pass --checkpoint best|last|PATH)" +
                       hint);
  }
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const std::exception& error) {
    throw std::runtime_error(path + ": cannot read the checkpoint (" + error.what() + ")");
  }
  if (!is_legacy_checkpoint(bytes)) return parse_checkpoint(bytes, path, remedy);
  TensorFile converted;
  try {
    converted = convert_legacy_checkpoint(bytes);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(path + ": " + error.what() + "; " + remedy);
  }
  spdlog::warn(
      "{}: an older checkpoint (a LibTorch archive), converted as it loads; `nmt convert {}` converts it "
      "once for good",
      path, path);
  return converted;
}

ConfigEntries read_config_entries(const TensorFile& file) {
  ConfigEntries entries;
  std::istringstream in(file.bytes(kConfigRecord));
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (tab != std::string::npos) entries.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return entries;
}

void write_checkpoint_atomic(const TensorFile& file, const std::string& path) {
  write_file_atomic(path, file.serialize());
}

void set_metadata_number(TensorFile& file, const std::string& key, int64_t value) {
  file.set_metadata(key, std::to_string(value));
}

void set_metadata_number(TensorFile& file, const std::string& key, double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);  // the shortest text that reads back
  file.set_metadata(key, std::string(text, result.ptr));
}

namespace {

template <typename Number>
Number metadata_number(const TensorFile& file, const std::string& key, const char* kind) {
  if (!file.has_metadata(key)) throw std::runtime_error("its metadata has no " + key);
  const std::string text = file.metadata(key);
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw std::runtime_error("its metadata " + key + " is not " + kind);
  }
  return value;
}

}  // namespace

int64_t metadata_integer(const TensorFile& file, const std::string& key) {
  return metadata_number<int64_t>(file, key, "an integer");
}

double metadata_real(const TensorFile& file, const std::string& key) {
  return metadata_number<double>(file, key, "a number");
}

void with_checkpoint_errors(const std::string& path, const std::function<void()>& read, const std::string& remedy) {
  try {
    read();
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    if (message.rfind(path, 0) == 0) throw;
    throw std::runtime_error(path + ": " + message + "; " + remedy);
  } catch (const c10::Error& error) {
    std::string message = error.what_without_backtrace();
    throw std::runtime_error(path + ": cannot read checkpoint: " + message.substr(0, message.find('\n')) + "; " +
                             remedy);
  }
}

}  // namespace nmt
