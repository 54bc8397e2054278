#include "train/checkpoint.h"

#include <torch/torch.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "util/io.h"

namespace nmt {

namespace {

constexpr const char* kFormatName = "nmt-rnn-checkpoint";

torch::Tensor bytes_to_tensor(const std::string& bytes) {
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(tensor.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return tensor;
}

std::string tensor_to_bytes(const torch::Tensor& tensor) {
  torch::Tensor contiguous = tensor.to(torch::kCPU).contiguous();
  return {reinterpret_cast<const char*>(contiguous.data_ptr<uint8_t>()), static_cast<size_t>(contiguous.numel())};
}

// Configuration entries as "key\tvalue\n" lines (values never contain newlines or tabs).
std::string encode_entries(const TrainConfig& config) {
  std::string text;
  for (const auto& [key, value] : config_entries(config)) text += key + "\t" + value + "\n";
  return text;
}

std::vector<std::pair<std::string, std::string>> decode_entries(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (tab != std::string::npos) entries.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return entries;
}

void write_double(torch::serialize::OutputArchive& archive, const std::string& key, double value) {
  archive.write(key, torch::tensor({value}, torch::kFloat64));
}

double read_double(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return tensor.item<double>();
}

}  // namespace

void save_checkpoint(const std::string& path, const ModelBundle& bundle, torch::optim::Optimizer* optimizer) {
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kFormatName)));
  archive.write("version", c10::IValue(kCheckpointVersion));
  archive.write("config", bytes_to_tensor(encode_entries(bundle.config)));
  archive.write("source_vocabulary", bytes_to_tensor(bundle.source_vocabulary.serialized()));
  archive.write("target_vocabulary", bytes_to_tensor(bundle.target_vocabulary.serialized()));
  const TrainingProgress& progress = bundle.progress;
  archive.write("step", c10::IValue(progress.step));
  archive.write("epoch", c10::IValue(progress.epoch));
  archive.write("batch_in_epoch", c10::IValue(progress.batch_in_epoch));
  archive.write("has_best", c10::IValue(progress.has_best));
  write_double(archive, "best_score", progress.best_score);
  archive.write("validations_without_improvement", c10::IValue(progress.validations_without_improvement));
  archive.write("plateau_count", c10::IValue(progress.plateau_count));
  write_double(archive, "learning_rate", progress.learning_rate);

  torch::serialize::OutputArchive model_archive;
  bundle.model->save(model_archive);
  archive.write("model", model_archive);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
  write_via_temporary(path, [&](const std::string& temporary) { archive.save_to(temporary); });
}

ModelBundle load_checkpoint(const std::string& path, const torch::Device& device) {
  if (!file_exists(path)) {
    throw std::runtime_error(path + ": checkpoint not found (train a model first, or pass --checkpoint best|last|PATH)");
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, device);
    c10::IValue format, version;
    archive.read("format", format);
    archive.read("version", version);
    if (!format.isString() || format.toStringRef() != kFormatName) {
      throw std::runtime_error(path + ": not an nmt checkpoint");
    }
    if (version.toInt() != kCheckpointVersion) {
      throw std::runtime_error(path + ": checkpoint format version " + std::to_string(version.toInt()) +
                               ", this build reads version " + std::to_string(kCheckpointVersion));
    }
    ModelBundle bundle;
    torch::Tensor bytes;
    archive.read("config", bytes);
    bundle.config = config_from_entries(decode_entries(tensor_to_bytes(bytes)));
    archive.read("source_vocabulary", bytes);
    bundle.source_vocabulary = Vocabulary::from_serialized(tensor_to_bytes(bytes), path + " (source vocabulary)");
    archive.read("target_vocabulary", bytes);
    bundle.target_vocabulary = Vocabulary::from_serialized(tensor_to_bytes(bytes), path + " (target vocabulary)");
    c10::IValue value;
    TrainingProgress& progress = bundle.progress;
    archive.read("step", value), progress.step = value.toInt();
    archive.read("epoch", value), progress.epoch = value.toInt();
    archive.read("batch_in_epoch", value), progress.batch_in_epoch = value.toInt();
    archive.read("has_best", value), progress.has_best = value.toBool();
    progress.best_score = read_double(archive, "best_score");
    archive.read("validations_without_improvement", value), progress.validations_without_improvement = value.toInt();
    archive.read("plateau_count", value), progress.plateau_count = value.toInt();
    progress.learning_rate = read_double(archive, "learning_rate");

    bundle.model = Seq2Seq(bundle.config.model, bundle.source_vocabulary.size(), bundle.target_vocabulary.size());
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    bundle.model->load(model_archive);
    bundle.model->to(device);
    return bundle;
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    if (message.rfind(path, 0) == 0) throw;
    throw std::runtime_error(path + ": " + message);
  } catch (const c10::Error& error) {
    std::string message = error.what_without_backtrace();
    throw std::runtime_error(path + ": cannot read checkpoint (truncated or corrupt?): " +
                             message.substr(0, message.find('\n')) +
                             "; use another checkpoint (--checkpoint best|last|PATH) or retrain");
  }
}

void restore_optimizer(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device) {
  try {
    torch::serialize::InputArchive archive, optimizer_archive;
    archive.load_from(path, device);
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
  } catch (const c10::Error& error) {
    std::string message = error.what_without_backtrace();
    throw std::runtime_error(path + ": cannot restore the optimizer state: " + message.substr(0, message.find('\n')));
  }
}

std::string resolve_checkpoint(const std::string& model_dir, const std::string& which) {
  if (which == "best") return (std::filesystem::path(model_dir) / kBestCheckpoint).string();
  if (which == "last") return (std::filesystem::path(model_dir) / kLastCheckpoint).string();
  return which;
}

}  // namespace nmt
