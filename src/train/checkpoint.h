// Self-describing checkpoints: weights, optimizer state, training progress, the resolved
// configuration and both vocabularies, behind a format name and version. translate/evaluate
// need nothing else. Files are written to a temporary name and renamed.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "config/train_config.h"
#include "model/seq2seq.h"
#include "text/vocabulary.h"

namespace torch::optim {
class Optimizer;
}

namespace nmt {

constexpr int64_t kCheckpointVersion = 1;

// The fixed file names in a model directory (step checkpoints are named by train/average.h).
inline constexpr const char* kBestCheckpoint = "best.ckpt";          // best validation so far
inline constexpr const char* kLastCheckpoint = "last.ckpt";          // where --resume continues
inline constexpr const char* kAveragedCheckpoint = "averaged.ckpt";  // nmt average's default output

struct TrainingProgress {
  int64_t step = 0;                 // updates done
  int64_t epoch = 0;                // current epoch (0-based)
  int64_t batch_in_epoch = 0;       // batches of `epoch` already done
  double best_score = 0;            // best validation value of best_metric so far
  bool has_best = false;
  int64_t validations_without_improvement = 0;
  int64_t plateau_count = 0;        // for the learning-rate schedule
  double learning_rate = 0;         // current base learning rate (after decays)
};

struct ModelBundle {
  TrainConfig config;
  Vocabulary source_vocabulary;
  Vocabulary target_vocabulary;
  Seq2Seq model{nullptr};
  TrainingProgress progress;
};

void save_checkpoint(const std::string& path, const ModelBundle& bundle, torch::optim::Optimizer* optimizer);

// Loads a checkpoint onto `device`; restores optimizer state when `optimizer` is given (its
// parameters must be the loaded model's, so call load_checkpoint first, then restore_optimizer).
ModelBundle load_checkpoint(const std::string& path, const torch::Device& device);
void restore_optimizer(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device);

// `which` is best, last or a path; model_dir/best.ckpt etc.
std::string resolve_checkpoint(const std::string& model_dir, const std::string& which);

}  // namespace nmt
