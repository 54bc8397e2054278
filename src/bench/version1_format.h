// Checkpoint format version 1, as nmt wrote and read it before checkpoints became safetensors
// files: a LibTorch archive, written and read by LibTorch itself. For the tests, which make
// version 1 files to convert (and craft hostile ones from them), and for the benchmark that sets
// loading version 2 against loading version 1. Nothing in nmt itself uses it: reading a LibTorch
// archive with LibTorch runs the code it carries (inference/legacy_checkpoint.h).
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <string>

#include "inference/model.h"
#include "train/checkpoint.h"

namespace nmt::bench {

// The bytes version 1's save_checkpoint wrote for `checkpoint` (with the optimizer's state when
// `optimizer` is given).
std::string version1_checkpoint(const TrainingCheckpoint& checkpoint, torch::optim::Optimizer* optimizer);

// What version 1's load_model did with those bytes: LibTorch's archive reader, then the network's
// own load. Only for files this process wrote.
TranslationModel load_version1_model(const std::string& bytes, const ModelOptions& options);

}  // namespace nmt::bench
