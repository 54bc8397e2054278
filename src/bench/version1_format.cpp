#include "bench/version1_format.h"

#include <torch/torch.h>

#include <cstring>
#include <sstream>

namespace nmt::bench {
namespace {

void write_bytes(torch::serialize::OutputArchive& archive, const std::string& key, const std::string& bytes) {
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(tensor.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  archive.write(key, tensor);
}

std::string read_bytes(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return {reinterpret_cast<const char*>(tensor.data_ptr<uint8_t>()), static_cast<size_t>(tensor.numel())};
}

}  // namespace

std::string version1_checkpoint(const TrainingCheckpoint& checkpoint, torch::optim::Optimizer* optimizer) {
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kCheckpointFormatName)));
  archive.write("version", c10::IValue(int64_t{1}));
  std::string config;
  for (const auto& [key, value] : config_entries(checkpoint.config)) config += key + "\t" + value + "\n";
  write_bytes(archive, "config", config);
  write_bytes(archive, "source_vocabulary", checkpoint.model.source_vocabulary.serialized());
  write_bytes(archive, "target_vocabulary", checkpoint.model.target_vocabulary.serialized());
  const TrainingProgress& progress = checkpoint.progress;
  archive.write("step", c10::IValue(progress.step));
  archive.write("epoch", c10::IValue(progress.epoch));
  archive.write("batch_in_epoch", c10::IValue(progress.batch_in_epoch));
  archive.write("has_best", c10::IValue(progress.has_best));
  archive.write("best_score", torch::tensor({progress.best_score}, torch::kFloat64));
  archive.write("validations_without_improvement", c10::IValue(progress.validations_without_improvement));
  archive.write("plateau_count", c10::IValue(progress.plateau_count));
  archive.write("learning_rate", torch::tensor({progress.learning_rate}, torch::kFloat64));
  if (checkpoint.random_state.defined()) archive.write("random_state", checkpoint.random_state);
  torch::serialize::OutputArchive model_archive;
  checkpoint.model.network->save(model_archive);
  archive.write("model", model_archive);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

TranslationModel load_version1_model(const std::string& bytes, const ModelOptions& options) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  TranslationModel model;
  model.options = options;
  model.source_vocabulary = Vocabulary::from_serialized(read_bytes(archive, "source_vocabulary"), "version 1");
  model.target_vocabulary = Vocabulary::from_serialized(read_bytes(archive, "target_vocabulary"), "version 1");
  model.network = Seq2Seq(options, model.source_vocabulary.size(), model.target_vocabulary.size());
  torch::serialize::InputArchive weights;
  archive.read("model", weights);
  model.network->load(weights);
  model.network->eval();
  return model;
}

}  // namespace nmt::bench
