// Inference-only model files (nmt export) and what compute type int8 does to a model's weights.
//
// Compute type int8 rounds every weight matrix of the model to int8 per row (model/linear/int8_linear.h's
// quantize_rows, then dequantize_rows): the encoder and the rest of the scorer compute in float32
// with the rounded matrices, and the decoder step multiplies by the int8 rows themselves. An int8
// export stores exactly those int8 rows and scales (a quarter of the float32 bytes) and loads into
// the same rounded matrices, so it translates exactly as its checkpoint does with --compute-type int8.
// A float32 export is the checkpoint's model and vocabularies without the training state.
#pragma once

#include <torch/nn/module.h>

#include <string>

#include "util/safetensors.h"

namespace nmt {

// What nmt export was asked for.
struct ExportJob {
  std::string model_dir;
  std::string checkpoint = "best";    // best, last or a path (inference/model.h's resolve_checkpoint)
  std::string compute_type = "int8";  // int8 | float32
  std::string output;
  bool force = false;  // replace an existing output file
};

// Writes the export; returns a line saying what was written (sizes). std::invalid_argument or
// std::runtime_error naming the file and what to do for a missing model, an output that exists
// (without force) or is the checkpoint itself, and a damaged checkpoint.
std::string export_model(const ExportJob& job);

// The compute type a file's weights are stored in: "int8" for an int8 export, "float32" otherwise
// (training checkpoints, float32 exports).
std::string stored_compute_type(const TensorFile& file);
// Whether an opened checkpoint file is an export (either compute type), which has no training state.
bool is_export(const TensorFile& file);

// Fills `network`'s parameters from an int8 export's records (dequantize_rows of the stored rows):
// a matrix's "model.NAME.int8_values" and "model.NAME.int8_scales", any other weight's "model.NAME".
// std::runtime_error naming `path` when the records do not fit the network.
void read_int8_parameters(const TensorFile& file, torch::nn::Module& network, const std::string& path);

// Replaces every weight matrix (2-D parameter) of `network` by its int8 rounding, per row.
void round_weights_to_int8(torch::nn::Module& network);

}  // namespace nmt
