#include "inference/export.h"

#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>
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

constexpr const char* kComputeTypeKey = "compute_type";  // metadata of exports only

bool is_matrix(const torch::Tensor& parameter) { return parameter.dim() == 2; }

// A matrix's records in an int8 export: its int8 rows and their scales.
std::string values_record(const std::string& name) { return weight_record(name) + ".int8_values"; }
std::string scales_record(const std::string& name) { return weight_record(name) + ".int8_scales"; }

void write_int8_parameters(TensorFile& file, torch::nn::Module& network) {
  for (const auto& [name, parameter] : distinct_weights(network)) {
    if (is_matrix(parameter)) {
      const QuantizedRows rows = quantize_rows(parameter);
      file.add(values_record(name), rows.values);
      file.add(scales_record(name), rows.scales);
    } else {
      file.add(weight_record(name), parameter);
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

bool is_export(const TensorFile& file) { return file.has_metadata(kComputeTypeKey); }

std::string stored_compute_type(const TensorFile& file) {
  const std::string type = file.metadata(kComputeTypeKey, "float32");
  if (type != "int8" && type != "float32") {
    throw std::runtime_error("an export of a compute type this build does not read; export the model again");
  }
  return type;
}

void read_int8_parameters(const TensorFile& file, torch::nn::Module& network, const std::string& path) {
  torch::NoGradGuard no_grad;
  std::vector<std::string> expected;
  for (auto& [name, parameter] : distinct_weights(network)) {
    torch::Tensor stored;
    if (is_matrix(parameter)) {
      expected.push_back(values_record(name));
      expected.push_back(scales_record(name));
      QuantizedRows rows{file.tensor(values_record(name)), file.tensor(scales_record(name))};
      const bool fits = rows.values.scalar_type() == torch::kInt8 && rows.values.sizes() == parameter.sizes() &&
                        rows.scales.scalar_type() == torch::kFloat32 && rows.scales.dim() == 1 &&
                        rows.scales.size(0) == parameter.size(0);
      if (!fits) throw std::runtime_error(path + ": " + name + " has the wrong shape or type; export it again");
      stored = dequantize_rows(rows);
    } else {
      expected.push_back(weight_record(name));
      stored = file.tensor(weight_record(name));
      if (stored.sizes() != parameter.sizes() || stored.scalar_type() != parameter.scalar_type()) {
        throw std::runtime_error(path + ": " + name + " has the wrong shape or type; export it again");
      }
    }
    parameter.copy_(stored);
  }
  refuse_unknown_weights(file, expected);
}

void round_weights_to_int8(torch::nn::Module& network) {
  torch::NoGradGuard no_grad;
  for (auto& [name, parameter] : distinct_weights(network)) {
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
  const TensorFile file = open_checkpoint(checkpoint);
  ConfigEntries entries;
  TranslationModel model;
  with_checkpoint_errors(checkpoint, [&] {
    entries = read_config_entries(file);
    model = read_model(file, model_options_from_entries(entries), checkpoint, torch::kCPU);
  });
  if (model.stored_compute_type != "float32") {
    throw std::invalid_argument(checkpoint + " is an int8 export already; export from the run's checkpoint");
  }

  TensorFile exported;
  write_checkpoint_header(exported, entries);
  exported.set_metadata(kComputeTypeKey, job.compute_type);
  exported.add_bytes(kSourceVocabularyRecord, model.source_vocabulary.serialized());
  exported.add_bytes(kTargetVocabularyRecord, model.target_vocabulary.serialized());
  if (job.compute_type == "int8") {
    write_int8_parameters(exported, *model.network);
  } else {
    write_weights(exported, *model.network);
  }
  write_checkpoint_atomic(exported, job.output);
  return "exported " + checkpoint + " (" + megabytes(fs::file_size(checkpoint)) + ") as " + job.compute_type + " to " +
         job.output + " (" + megabytes(fs::file_size(job.output)) + ")";
}

}  // namespace nmt
