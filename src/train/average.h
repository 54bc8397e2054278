// Checkpoint averaging (Junczys-Dowmunt et al. 2016; Vaswani et al. 2017): the element-wise mean
// of the weights of the last few checkpoints of one run, a cheap ensemble in a single model.
// The trainer keeps them as step-NNNNNNNN.ckpt when keep-checkpoints > 0; `nmt average` writes the
// mean as a normal checkpoint that translate and evaluate read with --checkpoint PATH.
#pragma once

#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace nmt {

// The file name of the checkpoint kept after `step` updates: step-00001500.ckpt.
std::string step_checkpoint_name(int64_t step);

// The step-*.ckpt files of model_dir, oldest first.
std::vector<std::string> step_checkpoints(const std::string& model_dir);

// Deletes all but the newest `keep` step checkpoints of model_dir.
void prune_step_checkpoints(const std::string& model_dir, int keep);

// The mean of the checkpoints' parameters and buffers. They must come from one run: the same
// model configuration and vocabularies, else std::runtime_error names the odd file. The result
// carries the newest (last) checkpoint's configuration, vocabularies and progress.
ModelBundle average_checkpoints(const std::vector<std::string>& paths, const torch::Device& device);

}  // namespace nmt
