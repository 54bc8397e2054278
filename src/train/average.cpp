#include "train/average.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace fs = std::filesystem;

namespace nmt {

std::string step_checkpoint_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld.ckpt", static_cast<long long>(step));
  return name;
}

std::vector<std::string> step_checkpoints(const std::string& model_dir) {
  std::vector<std::string> paths;
  if (!fs::is_directory(model_dir)) return paths;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() == step_checkpoint_name(0).size() && name.rfind("step-", 0) == 0 &&
        name.substr(name.size() - 5) == ".ckpt") {
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());  // zero-padded step numbers sort by step
  return paths;
}

void prune_step_checkpoints(const std::string& model_dir, int keep) {
  std::vector<std::string> paths = step_checkpoints(model_dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 0)) < paths.size(); ++i) fs::remove(paths[i]);
}

ModelBundle average_checkpoints(const std::vector<std::string>& paths, const torch::Device& device) {
  if (paths.empty()) throw std::invalid_argument("average: no checkpoints given");
  ModelBundle result = load_checkpoint(paths.back(), device);
  torch::NoGradGuard no_grad;
  auto result_tensors = result.model->named_parameters();
  auto result_buffers = result.model->named_buffers();
  std::vector<torch::Tensor> sums;
  for (const auto& item : result_tensors) sums.push_back(item.value().to(torch::kFloat64));
  for (const auto& item : result_buffers) sums.push_back(item.value().to(torch::kFloat64));

  for (size_t i = 0; i + 1 < paths.size(); ++i) {
    ModelBundle other = load_checkpoint(paths[i], device);
    // The model and vocabularies must be the same; training-only keys (max-minutes...) may differ
    // between a run and its --resume, so compare what defines the network.
    const bool same_vocabulary = other.source_vocabulary.serialized() == result.source_vocabulary.serialized() &&
                                 other.target_vocabulary.serialized() == result.target_vocabulary.serialized();
    std::vector<torch::Tensor> tensors;
    for (const auto& item : other.model->named_parameters()) tensors.push_back(item.value());
    for (const auto& item : other.model->named_buffers()) tensors.push_back(item.value());
    bool same_shapes = same_vocabulary && tensors.size() == sums.size();
    for (size_t k = 0; same_shapes && k < tensors.size(); ++k) same_shapes = tensors[k].sizes() == sums[k].sizes();
    if (!same_shapes || other.config.model.attention != result.config.model.attention) {
      throw std::runtime_error(paths[i] + ": not from the same run as " + paths.back() +
                               " (different model or vocabulary); average checkpoints of one run only");
    }
    for (size_t k = 0; k < tensors.size(); ++k) sums[k].add_(tensors[k].to(torch::kFloat64));
  }
  const double count = static_cast<double>(paths.size());
  size_t k = 0;
  for (auto& item : result_tensors) item.value().copy_(sums[k++].div_(count));
  for (auto& item : result_buffers) item.value().copy_(sums[k++].div_(count));
  return result;
}

}  // namespace nmt
