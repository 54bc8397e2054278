// Checkpoint averaging (Junczys-Dowmunt et al. 2016; Vaswani et al. 2017): the element-wise mean
// of the weights of the last few checkpoints of one run, a cheap ensemble in a single model.
// The trainer keeps them as step-NNNNNNNN.ckpt when keep-checkpoints > 0; `nmt average` writes the
// mean as a normal checkpoint that translate and evaluate read with --checkpoint PATH.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace nmt {

// The file name of the checkpoint kept after `step` updates: step-00001500.ckpt.
std::string step_checkpoint_name(int64_t step);

// The step of a file name made by step_checkpoint_name (any number of digits), or -1.
int64_t step_of_checkpoint_name(const std::string& file_name);

// The step-*.ckpt files of model_dir, lowest step first.
std::vector<std::string> step_checkpoints(const std::string& model_dir);

// Deletes all but the newest `keep` step checkpoints of model_dir. Returns the files it could not
// delete (a warning for the log, not a reason to stop training).
std::vector<std::string> prune_step_checkpoints(const std::string& model_dir, int keep);

// Deletes the step checkpoints of model_dir after `step` (all of them for -1): those of a run
// that --resume continues from an earlier last.ckpt, or of a run that --overwrite replaces.
// Returns how many it deleted.
int remove_step_checkpoints_after(const std::string& model_dir, int64_t step);

// The mean of the checkpoints' parameters and buffers. They must come from one run: the same
// model configuration and vocabularies, else std::runtime_error names the odd file. The result
// carries the newest (last) checkpoint's configuration, vocabularies and progress.
TrainingCheckpoint average_checkpoints(const std::vector<std::string>& paths, const torch::Device& device);

struct AverageJob {
  std::string model_dir;
  int last = 0;                          // the newest N step checkpoints (0 = all kept)
  std::vector<std::string> checkpoints;  // these files instead
  std::string output;                    // default model_dir/averaged.ckpt
};

// `nmt average`: averages and writes the checkpoint, then says what it did on `out`.
void run_average(AverageJob job, std::ostream& out);

}  // namespace nmt
