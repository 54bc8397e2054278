#include "train/average.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "util/io.h"

namespace fs = std::filesystem;

namespace nmt {

std::string step_checkpoint_name(int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "step-%08lld.ckpt", static_cast<long long>(step));
  return name;
}

int64_t step_of_checkpoint_name(const std::string& file_name) {
  const std::string prefix = "step-", suffix = ".ckpt";
  if (file_name.size() <= prefix.size() + suffix.size() || file_name.rfind(prefix, 0) != 0 ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

std::vector<std::string> step_checkpoints(const std::string& model_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  if (!fs::is_directory(model_dir, error)) return {};
  for (const auto& entry : fs::directory_iterator(model_dir, error)) {
    const int64_t step = step_of_checkpoint_name(entry.path().filename().string());
    if (step >= 0 && entry.is_regular_file(error)) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::vector<std::string> prune_step_checkpoints(const std::string& model_dir, int keep) {
  const std::vector<std::string> paths = step_checkpoints(model_dir);
  std::vector<std::string> failed;
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 0)) < paths.size(); ++i) {
    std::error_code error;
    if (!fs::remove(paths[i], error) && error) failed.push_back(paths[i] + ": " + error.message());
  }
  return failed;
}

int remove_step_checkpoints_after(const std::string& model_dir, int64_t step) {
  int removed = 0;
  for (const auto& path : step_checkpoints(model_dir)) {
    if (step_of_checkpoint_name(fs::path(path).filename().string()) > step) removed += fs::remove(path) ? 1 : 0;
  }
  return removed;
}

namespace {

// Parameters, then buffers, in registration order: the same order for every model of one
// configuration. The tensors share storage with the model.
std::vector<torch::Tensor> weights_of(Seq2Seq& model) {
  std::vector<torch::Tensor> tensors = model->parameters();
  for (const auto& buffer : model->buffers()) tensors.push_back(buffer);
  return tensors;
}

}  // namespace

TrainingCheckpoint average_checkpoints(const std::vector<std::string>& paths, const torch::Device& device) {
  if (paths.empty()) throw std::invalid_argument("average: no checkpoints given");
  TrainingCheckpoint result = load_training_checkpoint(paths.back(), device);
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> result_weights = weights_of(result.model.network);
  std::vector<torch::Tensor> sums;
  for (const auto& weight : result_weights) sums.push_back(weight.to(torch::kFloat64));

  for (size_t i = 0; i + 1 < paths.size(); ++i) {
    TrainingCheckpoint other = load_training_checkpoint(paths[i], device);
    // The model and vocabularies must be the same; training-only keys (max-minutes...) may differ
    // between a run and its --resume, so compare what defines the network.
    const std::vector<torch::Tensor> weights = weights_of(other.model.network);
    bool same = other.model.source_vocabulary.serialized() == result.model.source_vocabulary.serialized() &&
                other.model.target_vocabulary.serialized() == result.model.target_vocabulary.serialized() &&
                other.config.model.attention == result.config.model.attention && weights.size() == sums.size();
    for (size_t k = 0; same && k < weights.size(); ++k) same = weights[k].sizes() == sums[k].sizes();
    if (!same) {
      throw std::runtime_error(paths[i] + ": not from the same run as " + paths.back() +
                               " (different model or vocabulary); average checkpoints of one run only");
    }
    for (size_t k = 0; k < weights.size(); ++k) sums[k].add_(weights[k].to(torch::kFloat64));
  }
  const double count = static_cast<double>(paths.size());
  for (size_t k = 0; k < sums.size(); ++k) result_weights[k].copy_(sums[k].div_(count));
  return result;
}

void run_average(AverageJob job, std::ostream& out) {
  if (!fs::is_directory(job.model_dir)) {
    throw FileNotFound(job.model_dir + ": model directory not found (train one with nmt train)");
  }
  std::vector<std::string> paths = job.checkpoints;
  if (paths.empty()) {
    paths = step_checkpoints(job.model_dir);
    if (paths.empty()) {
      throw std::runtime_error(job.model_dir +
                               ": no step-*.ckpt checkpoints to average; train with keep-checkpoints = N");
    }
    if (job.last > 0 && static_cast<size_t>(job.last) < paths.size())
      paths.erase(paths.begin(), paths.end() - job.last);
  }
  if (job.output.empty()) job.output = (fs::path(job.model_dir) / kAveragedCheckpoint).string();
  const std::string output_name = fs::path(job.output).filename().string();
  if (output_name == kBestCheckpoint || output_name == kLastCheckpoint || step_of_checkpoint_name(output_name) >= 0) {
    throw std::invalid_argument("--output " + job.output +
                                ": the trainer's own checkpoint names are reserved; choose another name");
  }
  if (fs::exists(job.output) && fs::path(job.output).extension() != ".ckpt") {
    throw std::invalid_argument("--output " + job.output +
                                " exists and is not a checkpoint (.ckpt); it is never replaced: choose another name");
  }
  require_parent_directory(job.output, "--output");
  const TrainingCheckpoint averaged = average_checkpoints(paths, torch::kCPU);
  save_checkpoint(job.output, averaged, nullptr);
  out << "averaged " << paths.size() << " checkpoints (" << fs::path(paths.front()).filename().string() << " .. "
      << fs::path(paths.back()).filename().string() << ") into " << job.output << "\n";
}

}  // namespace nmt
