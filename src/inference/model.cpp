#include "inference/model.h"

#include <torch/torch.h>

#include <filesystem>

#include "config/model_fields.h"

namespace nmt {

TranslationModel read_model(torch::serialize::InputArchive& archive, const ModelOptions& options,
                            const std::string& path, const torch::Device& device) {
  TranslationModel model;
  model.options = options;
  model.source_vocabulary =
      Vocabulary::from_serialized(read_bytes(archive, "source_vocabulary"), path + " (source vocabulary)");
  model.target_vocabulary =
      Vocabulary::from_serialized(read_bytes(archive, "target_vocabulary"), path + " (target vocabulary)");
  model.network = Seq2Seq(options, model.source_vocabulary.size(), model.target_vocabulary.size());
  torch::serialize::InputArchive weights;
  archive.read("model", weights);
  model.network->load(weights);
  model.network->to(device);
  return model;
}

TranslationModel load_model(const std::string& path, const torch::Device& device) {
  torch::serialize::InputArchive archive;
  open_checkpoint(path, device, archive);
  TranslationModel model;
  with_checkpoint_errors(path, [&] {
    model = read_model(archive, model_options_from_entries(read_config_entries(archive)), path, device);
  });
  return model;
}

std::string resolve_checkpoint(const std::string& model_dir, const std::string& which) {
  if (which == "best") return (std::filesystem::path(model_dir) / kBestCheckpoint).string();
  if (which == "last") return (std::filesystem::path(model_dir) / kLastCheckpoint).string();
  return which;
}

TranslationModel load_model_from_directory(const std::string& model_dir, const std::string& which,
                                           const torch::Device& device) {
  if (!std::filesystem::is_directory(model_dir)) {
    throw std::runtime_error(model_dir + ": model directory not found (train one with nmt train)");
  }
  return load_model(resolve_checkpoint(model_dir, which), device);
}

}  // namespace nmt
