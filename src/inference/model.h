// A trained model for translation: its options, vocabularies and weights, loaded from any
// checkpoint without the training code (training state is train/checkpoint.h's).
#pragma once

#include <torch/types.h>

#include <string>

#include "inference/checkpoint_format.h"
#include "model/options.h"
#include "model/seq2seq.h"
#include "text/vocabulary.h"

namespace nmt {

struct TranslationModel {
  ModelOptions options;
  Vocabulary source_vocabulary;
  Vocabulary target_vocabulary;
  Seq2Seq network{nullptr};
};

// Loads the model of the checkpoint at `path` onto `device`. Throws std::runtime_error naming the
// file (missing, not a checkpoint, another format version, truncated).
TranslationModel load_model(const std::string& path, const torch::Device& device);

// The model part of an opened checkpoint (open_checkpoint), built with `options`.
TranslationModel read_model(torch::serialize::InputArchive& archive, const ModelOptions& options,
                            const std::string& path, const torch::Device& device);

// `which` is best, last or a path: model_dir/best.ckpt, model_dir/last.ckpt, or `which` itself.
std::string resolve_checkpoint(const std::string& model_dir, const std::string& which);

// Checks that `model_dir` exists, then loads its checkpoint `which` (resolve_checkpoint).
TranslationModel load_model_from_directory(const std::string& model_dir, const std::string& which,
                                           const torch::Device& device);

}  // namespace nmt
