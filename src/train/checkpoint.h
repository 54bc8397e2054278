// Checkpoints as training writes them and --resume reads them: the model (inference/model.h),
// the whole training configuration, progress, and optimizer state (inference/checkpoint_format.h
// has the format). Files are written to a temporary name and renamed.
#pragma once

#include <torch/optim/adam.h>
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <string>

#include "config/train_config.h"
#include "inference/checkpoint_format.h"
#include "inference/model.h"

namespace torch::optim {
class Optimizer;
}

namespace nmt {

// Where a run stands; stored in every checkpoint, so that --resume continues from it.
// One validation metric's history: its best value so far and the validations since it improved.
struct MetricRecord {
  bool has_best = false;
  double best = 0;
  int64_t stalled = 0;
};

struct TrainingProgress {
  int64_t step = 0;            // updates done
  int64_t epoch = 0;           // current epoch (0-based)
  int64_t batch_in_epoch = 0;  // batches of `epoch` already done
  double best_score = 0;       // best validation value of best_metric so far
  bool has_best = false;
  int64_t validations_without_improvement = 0;
  int64_t plateau_count = 0;  // for the learning-rate schedule
  double learning_rate = 0;   // current base learning rate (after decays)
  // Every metric's record (indexed by Metric), whichever the run watches, so that --resume may
  // change best-metric and early stopping's metrics and find their histories.
  std::array<MetricRecord, kMetrics> metrics{};
};

struct TrainingCheckpoint {
  TrainConfig config;
  TranslationModel model;  // model.options is config.model
  TrainingProgress progress;
  // LibTorch's CPU generator as it was when the checkpoint was saved (dropout draws from it), so
  // that --resume continues with the draws the run would have made; undefined in a checkpoint
  // written before it was stored.
  torch::Tensor random_state;
  // The GPU's generator likewise (dropout on a GPU draws from it), in a checkpoint written by a run
  // on a GPU; undefined otherwise.
  torch::Tensor cuda_random_state;
  // The optimizer's records as loaded (train/optimizer_state.h), for restore_optimizer; empty in a
  // checkpoint written without them.
  TensorFile optimizer_state;
};

// Writes the checkpoint, with the current state of LibTorch's CPU generator as random_state, and
// of the model's GPU's as cuda_random_state when the model is on one.
void save_checkpoint(const std::string& path, const TrainingCheckpoint& checkpoint, torch::optim::Optimizer* optimizer);

// Loads a checkpoint with its training configuration and progress onto `device`; errors name the
// file and end with `remedy` (inference/checkpoint_format.h).
TrainingCheckpoint load_training_checkpoint(const std::string& path, const torch::Device& device,
                                            const std::string& remedy = kChooseAnotherCheckpoint);

// The step a training checkpoint was written at, without building its model; errors name the file.
int64_t read_checkpoint_step(const std::string& path);

// Restores the optimizer state `checkpoint` was loaded with (from `path`) onto the devices of
// `optimizer`'s parameters, which must be its model's, and lets go of its records.
void restore_optimizer(TrainingCheckpoint& checkpoint, const std::string& path, torch::optim::Adam& optimizer);

}  // namespace nmt
