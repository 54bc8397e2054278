#include "inference/checkpoint_format.h"

#include <torch/torch.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "util/io.h"
#include "util/zip_check.h"

namespace nmt {
namespace {

constexpr const char* kFormatName = "nmt-rnn-checkpoint";

}  // namespace

void write_bytes(torch::serialize::OutputArchive& archive, const std::string& key, const std::string& bytes) {
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(tensor.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  archive.write(key, tensor);
}

std::string read_bytes(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  const torch::Tensor contiguous = tensor.to(torch::kCPU).contiguous();
  return {reinterpret_cast<const char*>(contiguous.data_ptr<uint8_t>()), static_cast<size_t>(contiguous.numel())};
}

void write_checkpoint_header(torch::serialize::OutputArchive& archive, const ConfigEntries& entries) {
  archive.write("format", c10::IValue(std::string(kFormatName)));
  archive.write("version", c10::IValue(kCheckpointVersion));
  // Values never contain newlines or tabs.
  std::string text;
  for (const auto& [key, value] : entries) text += key + "\t" + value + "\n";
  write_bytes(archive, "config", text);
}

void open_checkpoint(const std::string& path, const torch::Device& device, torch::serialize::InputArchive& archive,
                     const std::string& remedy) {
  if (!file_exists(path)) {
    throw FileNotFound(path + ": checkpoint not found (train a model first, or pass --checkpoint best|last|PATH)");
  }
  with_checkpoint_errors(
      path,
      [&] {
        try {
          check_zip_file(path);  // before LibTorch reads it: its reader trusts the bytes
        } catch (const std::runtime_error& error) {
          throw std::runtime_error(path + ": a damaged checkpoint (" + error.what() + "); " + remedy);
        }
        archive.load_from(path, device);
        c10::IValue format, version;
        archive.read("format", format);
        archive.read("version", version);
        if (!format.isString() || format.toStringRef() != kFormatName) {
          throw std::runtime_error(path + ": not an nmt checkpoint; " + remedy);
        }
        if (version.toInt() != kCheckpointVersion) {
          throw std::runtime_error(path + ": checkpoint format version " + std::to_string(version.toInt()) +
                                   ", this build reads version " + std::to_string(kCheckpointVersion));
        }
      },
      remedy);
}

void write_archive_atomic(torch::serialize::OutputArchive& archive, const std::string& path) {
  std::string bytes;
  archive.save_to([&](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  write_file_atomic(path, bytes);
}

ConfigEntries read_config_entries(torch::serialize::InputArchive& archive) {
  ConfigEntries entries;
  std::istringstream in(read_bytes(archive, "config"));
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (tab != std::string::npos) entries.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return entries;
}

void with_checkpoint_errors(const std::string& path, const std::function<void()>& read, const std::string& remedy) {
  try {
    read();
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    if (message.rfind(path, 0) == 0) throw;
    throw std::runtime_error(path + ": " + message);
  } catch (const c10::Error& error) {
    std::string message = error.what_without_backtrace();
    throw std::runtime_error(path + ": cannot read checkpoint (truncated or corrupt?): " +
                             message.substr(0, message.find('\n')) + "; " + remedy);
  }
}

}  // namespace nmt
