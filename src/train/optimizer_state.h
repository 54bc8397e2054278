// Adam's state as records of a checkpoint (inference/checkpoint_format.h), and of the bytes rank 0
// hands the other ranks (train/replicas.h). Metadata: "optimizer.groups", the number of parameter
// groups; for group G, "optimizer.G.size" (its parameters) and its options "optimizer.G.lr", ".beta1",
// ".beta2", ".eps", ".weight_decay" and ".amsgrad"; for the J-th parameter of group G once it has
// taken a step, "optimizer.G.J.step". Tensors: "optimizer.G.J.exp_avg", ".exp_avg_sq" and, with
// amsgrad, ".max_exp_avg_sq". States are matched to parameters by their place, as LibTorch's own
// optimizer load does.
#pragma once

#include <torch/optim/adam.h>

#include "util/safetensors.h"

namespace nmt {

void write_adam_state(TensorFile& file, torch::optim::Adam& optimizer);

// Whether `file` holds an optimizer state (a step checkpoint or best.ckpt holds none).
bool has_adam_state(const TensorFile& file);

// Restores what write_adam_state wrote onto `optimizer`'s parameters, on their devices.
// std::runtime_error when the groups, their sizes or a state's shapes differ from the optimizer's.
void read_adam_state(const TensorFile& file, torch::optim::Adam& optimizer);

}  // namespace nmt
