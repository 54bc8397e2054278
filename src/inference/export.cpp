#include "inference/export.h"

#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>
#include <unordered_set>
#include <utility>
#include <vector>

#include "config/model_fields.h"
#include "inference/checkpoint_format.h"
#include "inference/model.h"
#include "model/linear/int8_linear.h"
#include "util/format.h"
#include "util/io.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kComputeTypeKey = "compute_type";  // in exports only
constexpr const char* kParameterNamesKey = "parameter_names";

// The network's parameters, each tensor once (a tied embedding is one), in registration order.
std::vector<std::pair<std::string, torch::Tensor>> distinct_parameters(torch::nn::Module& network) {
  std::vector<std::pair<std::string, torch::Tensor>> parameters;
  std::unordered_set<const void*> seen;
  for (const auto& item : network.named_parameters()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) parameters.emplace_back(item.key(), item.value());
  }
  return parameters;
}

std::string parameter_names(const std::vector<std::pair<std::string, torch::Tensor>>& parameters) {
  std::string names;
  for (const auto& [name, parameter] : parameters) names += name + "\n";
  return names;
}

bool is_matrix(const torch::Tensor& parameter) { return parameter.dim() == 2; }

// The i-th parameter's records: a matrix's int8 rows and their scales, or the float32 tensor.
std::string values_key(size_t i) { return "values_" + std::to_string(i); }
std::string scales_key(size_t i) { return "scales_" + std::to_string(i); }
std::string parameter_key(size_t i) { return "parameter_" + std::to_string(i); }

void write_int8_parameters(torch::serialize::OutputArchive& archive, torch::nn::Module& network) {
  const auto parameters = distinct_parameters(network);
  write_bytes(archive, kParameterNamesKey, parameter_names(parameters));
  for (size_t i = 0; i < parameters.size(); ++i) {
    const torch::Tensor& parameter = parameters[i].second;
    if (is_matrix(parameter)) {
      const QuantizedRows rows = quantize_rows(parameter);
      archive.write(values_key(i), rows.values);
      archive.write(scales_key(i), rows.scales);
    } else {
      archive.write(parameter_key(i), parameter.detach().to(torch::kCPU));
    }
  }
}

// Refuses an output that would replace the checkpoint, an existing file without --force, or a run's
// own checkpoint names (--resume and translate's defaults read them).
void check_output(const ExportJob& job, const std::string& checkpoint) {
  if (job.output.empty()) throw std::invalid_argument("--output: give the file to write the exported model to");
  const std::string name = fs::path(job.output).filename().string();
  if (name == kBestCheckpoint || name == kLastCheckpoint) {
    throw std::invalid_argument("--output " + job.output +
                                ": the trainer's own checkpoint names are reserved; choose another name");
  }
  std::error_code error;
  if (fs::exists(job.output, error) && fs::equivalent(job.output, checkpoint, error)) {
    throw std::invalid_argument("--output " + job.output + " is the checkpoint being exported; choose another name");
  }
  if (fs::exists(job.output) && !job.force) {
    throw std::invalid_argument("--output " + job.output +
                                " exists; choose another name, or pass --force to replace it");
  }
  require_parent_directory(job.output, "--output");
}

std::string megabytes(uintmax_t bytes) { return format_fixed(static_cast<double>(bytes) / 1e6, 1) + " MB"; }

}  // namespace

bool is_export(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  return archive.try_read(kComputeTypeKey, value);
}

std::string stored_compute_type(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  if (!archive.try_read(kComputeTypeKey, value)) return "float32";
  if (!value.isString() || (value.toStringRef() != "int8" && value.toStringRef() != "float32")) {
    throw std::runtime_error("an export of a compute type this build does not read; export the model again");
  }
  return value.toStringRef();
}

void read_int8_parameters(torch::serialize::InputArchive& archive, torch::nn::Module& network,
                          const std::string& path) {
  const auto parameters = distinct_parameters(network);
  if (read_bytes(archive, kParameterNamesKey) != parameter_names(parameters)) {
    throw std::runtime_error(path + ": an int8 export whose weights do not fit its configuration; export it again");
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& [name, parameter] = parameters[i];
    torch::Tensor stored;
    if (is_matrix(parameter)) {
      QuantizedRows rows;
      archive.read(values_key(i), rows.values);
      archive.read(scales_key(i), rows.scales);
      const bool fits = rows.values.scalar_type() == torch::kInt8 && rows.values.sizes() == parameter.sizes() &&
                        rows.scales.scalar_type() == torch::kFloat32 && rows.scales.dim() == 1 &&
                        rows.scales.size(0) == parameter.size(0);
      if (!fits) throw std::runtime_error(path + ": " + name + " has the wrong shape or type; export it again");
      stored = dequantize_rows({rows.values.to(torch::kCPU), rows.scales.to(torch::kCPU)});
    } else {
      archive.read(parameter_key(i), stored);
      if (stored.sizes() != parameter.sizes() || stored.scalar_type() != parameter.scalar_type()) {
        throw std::runtime_error(path + ": " + name + " has the wrong shape or type; export it again");
      }
    }
    parameter.copy_(stored);
  }
}

void round_weights_to_int8(torch::nn::Module& network) {
  torch::NoGradGuard no_grad;
  for (auto& [name, parameter] : distinct_parameters(network)) {
    if (is_matrix(parameter)) parameter.copy_(dequantize_rows(quantize_rows(parameter)));
  }
}

std::string export_model(const ExportJob& job) {
  if (job.compute_type != "int8" && job.compute_type != "float32") {
    throw std::invalid_argument("--compute-type " + job.compute_type + ": int8 or float32");
  }
  if (!fs::is_directory(job.model_dir)) {
    throw FileNotFound(job.model_dir + ": model directory not found (train one with nmt train)");
  }
  const std::string checkpoint = resolve_checkpoint(job.model_dir, job.checkpoint);
  check_output(job, checkpoint);
  torch::serialize::InputArchive archive;
  open_checkpoint(checkpoint, torch::kCPU, archive);
  ConfigEntries entries;
  TranslationModel model;
  with_checkpoint_errors(checkpoint, [&] {
    entries = read_config_entries(archive);
    model = read_model(archive, model_options_from_entries(entries), checkpoint, torch::kCPU);
  });
  if (model.stored_compute_type != "float32") {
    throw std::invalid_argument(checkpoint + " is an int8 export already; export from the run's checkpoint");
  }

  torch::serialize::OutputArchive exported;
  write_checkpoint_header(exported, entries);
  exported.write(kComputeTypeKey, c10::IValue(job.compute_type));
  write_bytes(exported, "source_vocabulary", model.source_vocabulary.serialized());
  write_bytes(exported, "target_vocabulary", model.target_vocabulary.serialized());
  if (job.compute_type == "int8") {
    write_int8_parameters(exported, *model.network);
  } else {
    torch::serialize::OutputArchive weights;
    model.network->save(weights);
    exported.write("model", weights);
  }
  write_archive_atomic(exported, job.output);
  return "exported " + checkpoint + " (" + megabytes(fs::file_size(checkpoint)) + ") as " + job.compute_type + " to " +
         job.output + " (" + megabytes(fs::file_size(job.output)) + ")";
}

}  // namespace nmt
