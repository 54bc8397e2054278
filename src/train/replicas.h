// How the ranks of a distributed run (distributed.h) start from one state: rank 0 sets the run up as
// a single process would (setup.h: vocabularies, prepared corpus, a new or resumed model) and hands
// the rest what they cannot make themselves, so that shared and separate file systems both work:
// the vocabularies, the progress and the optimizer state through the store, the weights by a
// broadcast. The other ranks map (or, on a machine of their own, prepare) the training corpus.
#pragma once

#include "config/train_config.h"
#include "train/distributed.h"
#include "train/setup.h"

namespace spdlog {
class logger;
}

namespace nmt {

// Rank 0, after set_up_training: the vocabularies, progress and optimizer state for the others.
void publish_setup(Distributed& distributed, const TrainingSetup& setup);

// Every other rank: the setup rank 0 published, with the training corpus opened (the first rank of
// each machine first, so that a machine without rank 0's files prepares its corpus once) and no
// dev set (rank 0 alone validates). The weights are not yet rank 0's: synchronize_weights.
TrainingSetup receive_setup(const TrainConfig& config, Distributed& distributed, spdlog::logger& log);

// What the other ranks read from the store is checked before it is used: anyone who reaches the
// store's port can write to it (train/rendezvous.h).
struct SetupMessage {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  double learning_rate = 0;
};
// The "setup" value: throws std::runtime_error unless it is JSON with every field, the counts
// non-negative and the learning rate finite and non-negative.
SetupMessage parse_setup(const std::string& text);

// The "optimizer" value (train/optimizer_state.h's records as a safetensors file) into
// `optimizer`: refused (std::runtime_error) unless the file is whole and fits the optimizer.
void load_optimizer_bytes(const std::string& bytes, FusedAdam& optimizer);

// Every rank: the model's weights become rank 0's.
void synchronize_weights(Distributed& distributed, TrainingSetup& setup);

}  // namespace nmt
