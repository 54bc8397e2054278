#include "inference/model.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "config/model_fields.h"
#include "inference/export.h"
#include "kernels/dispatch.h"
#include "util/io.h"

namespace nmt {

namespace {

std::string format_sizes(c10::IntArrayRef sizes) {
  std::ostringstream text;
  text << sizes;
  return text.str();
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> distinct_weights(torch::nn::Module& network) {
  std::vector<std::pair<std::string, torch::Tensor>> weights;
  std::unordered_set<const void*> seen;
  for (const auto& item : network.named_parameters()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) weights.emplace_back(item.key(), item.value());
  }
  for (const auto& item : network.named_buffers()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) weights.emplace_back(item.key(), item.value());
  }
  return weights;
}

void write_weights(TensorFile& file, torch::nn::Module& network) {
  for (const auto& [name, weight] : distinct_weights(network)) file.add(weight_record(name), weight);
}

void refuse_unknown_weights(const TensorFile& file, const std::vector<std::string>& expected) {
  const std::unordered_set<std::string> known(expected.begin(), expected.end());
  for (const auto& [name, tensor] : file.tensors()) {
    if (name.rfind("model.", 0) == 0 && known.count(name) == 0) {
      throw std::runtime_error("it holds weight " + name.substr(0, 80) +
                               ", which a model of its configuration does not have");
    }
  }
}

void read_weights(const TensorFile& file, torch::nn::Module& network) {
  torch::NoGradGuard no_grad;
  std::vector<std::string> expected;
  for (auto& [name, weight] : distinct_weights(network)) {
    expected.push_back(weight_record(name));
    const torch::Tensor& stored = file.tensor(expected.back());
    if (stored.sizes() != weight.sizes() || stored.scalar_type() != weight.scalar_type()) {
      throw std::runtime_error("weight " + name + " is stored as " + std::string(c10::toString(stored.scalar_type())) +
                               " " + format_sizes(stored.sizes()) + ", its configuration needs " +
                               c10::toString(weight.scalar_type()) + " " + format_sizes(weight.sizes()));
    }
    weight.copy_(stored);
  }
  refuse_unknown_weights(file, expected);
}

TranslationModel read_model(const TensorFile& file, const ModelOptions& options, const std::string& path,
                            const torch::Device& device) {
  // Checked as a config's are, before anything is built: a damaged or hand-edited checkpoint (its
  // attention-heads 0, say) gets a message, not a division by zero in a constructor.
  try {
    validate(options);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(path + ": its model options are invalid (" + error.what() +
                             "); use another checkpoint or train again");
  }
  TranslationModel model;
  model.options = options;
  model.source_vocabulary =
      Vocabulary::from_serialized(file.bytes(kSourceVocabularyRecord), path + " (source vocabulary)");
  model.target_vocabulary =
      Vocabulary::from_serialized(file.bytes(kTargetVocabularyRecord), path + " (target vocabulary)");
  model.network = Seq2Seq(options, model.source_vocabulary.size(), model.target_vocabulary.size());
  model.stored_compute_type = stored_compute_type(file);
  if (model.stored_compute_type == "int8") {
    read_int8_parameters(file, *model.network, path);
  } else {
    read_weights(file, *model.network);
  }
  model.network->to(device);
  // For translation: no dropout. Translators that share it never switch it (search/translator.cpp),
  // so that threads translating at once (nmt serve's workers, Python threads) read it as it is.
  model.network->eval();
  return model;
}

TranslationModel load_model(const std::string& path, const torch::Device& device) {
  const TensorFile file = open_checkpoint(path);
  TranslationModel model;
  with_checkpoint_errors(
      path, [&] { model = read_model(file, model_options_from_entries(read_config_entries(file)), path, device); });
  return model;
}

std::string resolve_checkpoint(const std::string& model_dir, const std::string& which) {
  if (which == "best" && std::filesystem::is_regular_file(model_dir)) return model_dir;
  if (which == "best") return (std::filesystem::path(model_dir) / kBestCheckpoint).string();
  if (which == "last") return (std::filesystem::path(model_dir) / kLastCheckpoint).string();
  return which;
}

TranslationModel load_model_from_directory(const std::string& model_dir, const std::string& which,
                                           const torch::Device& device) {
  if (!std::filesystem::is_directory(model_dir) && !std::filesystem::is_regular_file(model_dir)) {
    throw FileNotFound(model_dir + ": model directory not found (train one with nmt train)");
  }
  return load_model(resolve_checkpoint(model_dir, which), device);
}

namespace {

// Throws when `vocabulary` (of checkpoint `path`) differs from `reference` (of `reference_path`).
void require_same_vocabulary(const Vocabulary& vocabulary, const std::string& path, const Vocabulary& reference,
                             const std::string& reference_path, const std::string& side) {
  const std::string refused = "ensemble: the " + side + " vocabulary of " + path + " differs from " + reference_path;
  const std::string hint = "; an ensemble's models must share their vocabularies (train them with one corpus-dir)";
  if (vocabulary.size() != reference.size()) {
    throw std::invalid_argument(refused + " (" + std::to_string(vocabulary.size()) + " subwords, not " +
                                std::to_string(reference.size()) + ")" + hint);
  }
  for (int64_t id = 0; id < vocabulary.size(); ++id) {
    if (vocabulary.piece(id) != reference.piece(id)) {
      throw std::invalid_argument(refused + " (subword " + std::to_string(id) + " is '" + vocabulary.piece(id) +
                                  "', not '" + reference.piece(id) + "')" + hint);
    }
  }
}

}  // namespace

Ensemble TranslationModels::ensemble() const {
  std::vector<Seq2Seq> networks;
  for (const TranslationModel& member : members) networks.push_back(member.network);
  return Ensemble(std::move(networks));
}

bool TranslationModels::has_attention() const {
  for (const TranslationModel& member : members) {
    if (member.options.attention != kNoAttention) return true;
  }
  return false;
}

std::string TranslationModels::attention() const {
  std::string names;
  for (const TranslationModel& member : members) names += (names.empty() ? "" : ", ") + member.options.attention;
  return names;
}

std::vector<std::pair<std::string, std::string>> model_checkpoints(const TranslateOptions& options) {
  const std::vector<std::string>& models = options.models;
  const std::vector<std::string> checkpoints =
      options.checkpoints.empty() ? std::vector<std::string>{"best"} : options.checkpoints;
  if (models.empty()) throw std::invalid_argument("--model: give the model directory (from nmt train)");
  std::vector<std::pair<std::string, std::string>> pairs;
  if (models.size() == 1) {
    for (const std::string& checkpoint : checkpoints) pairs.emplace_back(models[0], checkpoint);
  } else if (checkpoints.size() == 1 || checkpoints.size() == models.size()) {
    for (size_t i = 0; i < models.size(); ++i)
      pairs.emplace_back(models[i], checkpoints[checkpoints.size() == 1 ? 0 : i]);
  } else {
    throw std::invalid_argument("--checkpoint: " + std::to_string(models.size()) + " --model and " +
                                std::to_string(checkpoints.size()) +
                                " --checkpoint; give one --checkpoint for every model, or one per --model");
  }
  return pairs;
}

TranslationModels load_models(const TranslateOptions& options, const torch::Device& device) {
  TranslationModels models;
  for (const auto& [model_dir, which] : model_checkpoints(options)) {
    models.members.push_back(load_model_from_directory(model_dir, which, device));
    models.checkpoints.push_back(resolve_checkpoint(model_dir, which));
    const TranslationModel& first = models.members.front();
    const TranslationModel& added = models.members.back();
    require_same_vocabulary(added.source_vocabulary, models.checkpoints.back(), first.source_vocabulary,
                            models.checkpoints.front(), "source");
    require_same_vocabulary(added.target_vocabulary, models.checkpoints.back(), first.target_vocabulary,
                            models.checkpoints.front(), "target");
  }
  models.compute_type = options.compute_type;
  if (models.compute_type == "default") {
    const bool exported = std::any_of(models.members.begin(), models.members.end(), [](const TranslationModel& member) {
      return member.stored_compute_type == "int8";
    });
    models.compute_type = exported ? "int8" : "float32";
  }
  if (models.compute_type == "int8") {
    if (!kernels::run_on(device)) {
      throw std::invalid_argument("--compute-type int8 runs on the CPU: use --device cpu, or float32 on a GPU");
    }
    for (TranslationModel& member : models.members) {
      if (member.stored_compute_type != "int8") round_weights_to_int8(*member.network);
      member.network->encoder->quantize_int8();
      member.network->decoder->quantize_int8();
    }
  } else if (models.compute_type != "float32") {
    throw std::invalid_argument("--compute-type " + options.compute_type + ": default, float32 or int8");
  } else if (kernels::run_on(device)) {
    for (TranslationModel& member : models.members) {
      member.network->encoder->pack_float32();
      member.network->decoder->pack_float32();
    }
  }
  if (!options.shortlist.empty()) {
    auto shortlist = std::make_shared<Shortlist>(Shortlist::read(options.shortlist));
    shortlist->check_vocabularies(models.source_vocabulary(), models.target_vocabulary(), models.checkpoints.front());
    models.shortlist = std::move(shortlist);
  }
  return models;
}

}  // namespace nmt
