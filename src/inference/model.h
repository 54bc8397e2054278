// A trained model for translation: its options, vocabularies and weights, loaded from any
// checkpoint without the training code (training state is train/checkpoint.h's).
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "config/translate_options.h"
#include "inference/checkpoint_format.h"
#include "model/options.h"
#include "model/seq2seq.h"
#include "search/ensemble.h"
#include "search/shortlist.h"
#include "text/vocabulary.h"

namespace nmt {

struct TranslationModel {
  ModelOptions options;
  Vocabulary source_vocabulary;
  Vocabulary target_vocabulary;
  Seq2Seq network{nullptr};  // in eval mode as loaded; training switches it to train()
  // "int8" for an int8 export (inference/export.h), whose weights are already rounded to int8;
  // "float32" for checkpoints and float32 exports.
  std::string stored_compute_type = "float32";
};

// Loads the model of the checkpoint at `path` onto `device`. Throws std::runtime_error naming the
// file (missing, not a checkpoint, another format version, truncated).
TranslationModel load_model(const std::string& path, const torch::Device& device);

// The model part of an opened checkpoint (open_checkpoint), built with `options`.
TranslationModel read_model(const TensorFile& file, const ModelOptions& options, const std::string& path,
                            const torch::Device& device);

// The network's parameters and buffers, each tensor once (a tied embedding is one), in registration
// order: what a checkpoint stores, as "model.NAME".
std::vector<std::pair<std::string, torch::Tensor>> distinct_weights(torch::nn::Module& network);
inline std::string weight_record(const std::string& name) { return "model." + name; }

// Adds the network's weights (float32 as trained) to `file`.
void write_weights(TensorFile& file, torch::nn::Module& network);
// Fills the network's weights from `file`. std::runtime_error when one is missing or has another
// shape or type, or when `file` holds a weight `network` does not have.
void read_weights(const TensorFile& file, torch::nn::Module& network);
// std::runtime_error naming the first "model." record of `file` that is not one of `expected`.
void refuse_unknown_weights(const TensorFile& file, const std::vector<std::string>& expected);

// `which` is best, last or a path: model_dir/best.ckpt, model_dir/last.ckpt, or `which` itself.
// A model_dir that is a file (an export from nmt export) is its own best.
std::string resolve_checkpoint(const std::string& model_dir, const std::string& which);

// Checks that `model_dir` exists (a directory, or an exported model file), then loads its checkpoint `which`
// (resolve_checkpoint).
TranslationModel load_model_from_directory(const std::string& model_dir, const std::string& which,
                                           const torch::Device& device);

// The models a translation runs with: one, or several decoding as an ensemble (search/ensemble.h).
struct TranslationModels {
  std::vector<TranslationModel> members;       // at least one; all share the first one's vocabularies
  std::vector<std::string> checkpoints;        // the file each member was loaded from
  std::shared_ptr<const Shortlist> shortlist;  // --shortlist, checked against the vocabularies; or none
  std::string compute_type = "float32";        // what the decoder multiplies in: float32 or int8

  Ensemble ensemble() const;
  const Vocabulary& source_vocabulary() const { return members.front().source_vocabulary; }
  const Vocabulary& target_vocabulary() const { return members.front().target_vocabulary; }
  // Whether any member has a scorer (attention heatmaps and alignments need one).
  bool has_attention() const;
  // The members' scorers, ", "-joined ("additive", or "additive, dot").
  std::string attention() const;
};

// The --model and --checkpoint lists of `options` as (model directory, checkpoint) pairs: every
// --checkpoint for one --model, one --checkpoint ("best" when none) for every --model, or one each.
// std::invalid_argument for other counts.
std::vector<std::pair<std::string, std::string>> model_checkpoints(const TranslateOptions& options);

// Loads every model of `options` (model_checkpoints) onto `device`, and its --shortlist. Models whose
// source or target vocabularies differ are refused with std::invalid_argument naming both
// checkpoints and the first differing subword; a shortlist made for other vocabularies too.
// Compute type "default" is int8 when a model is an int8 export and float32 otherwise; int8 rounds
// every weight matrix to int8 (inference/export.h) and quantizes the encoder's recurrent network and
// the decoder step (EncoderImpl and DecoderImpl::quantize_int8); float32 on the CPU packs their
// weights for the kernels (pack_float32).
TranslationModels load_models(const TranslateOptions& options, const torch::Device& device);

}  // namespace nmt
