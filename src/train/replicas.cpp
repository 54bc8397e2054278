#include "train/replicas.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

#include "train/optimizer_state.h"
#include "util/runtime.h"
#include "util/safetensors.h"

namespace nmt {

namespace {

std::string corpus_key(int rank) { return "corpus-ready/" + std::to_string(rank); }

}  // namespace

SetupMessage parse_setup(const std::string& text) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    SetupMessage message{json.at("step").get<int64_t>(), json.at("epoch").get<int64_t>(),
                         json.at("batch_in_epoch").get<int64_t>(), json.at("learning_rate").get<double>()};
    if (message.step < 0 || message.epoch < 0 || message.batch_in_epoch < 0 ||
        !(std::isfinite(message.learning_rate) && message.learning_rate >= 0)) {
      throw std::runtime_error("a value out of range");
    }
    return message;
  } catch (const std::exception& error) {
    throw std::runtime_error(std::string("rank 0's setup read from the rendezvous store is not valid (") +
                             error.what() + "): is another process writing to the store's port?");
  }
}

void load_optimizer_bytes(const std::string& bytes, FusedAdam& optimizer) {
  // Read as a checkpoint's records are (util/safetensors.h): every length checked, nothing run.
  try {
    read_adam_state(TensorFile::parse(bytes), optimizer);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string("rank 0's optimizer state read from the rendezvous store is not valid (") +
                             error.what() + "): is another process writing to the store's port?");
  }
}

void publish_setup(Distributed& distributed, const TrainingSetup& setup) {
  const TrainingCheckpoint& state = setup.state;
  distributed.publish("vocabulary/source", state.model.source_vocabulary.serialized());
  distributed.publish("vocabulary/target", state.model.target_vocabulary.serialized());
  TensorFile optimizer_state;
  write_adam_state(optimizer_state, *setup.optimizer);
  distributed.publish("optimizer", optimizer_state.serialize());
  const TrainingProgress& progress = state.progress;
  const nlohmann::json message = {{"step", progress.step},
                                  {"epoch", progress.epoch},
                                  {"batch_in_epoch", progress.batch_in_epoch},
                                  {"learning_rate", progress.learning_rate}};
  distributed.publish("setup", message.dump());
  distributed.publish(corpus_key(0), "ready");
}

TrainingSetup receive_setup(const TrainConfig& config, Distributed& distributed, spdlog::logger& log) {
  set_threads(config.threads);
  TrainingSetup setup;
  setup.device = parse_device(config.device, distributed.local_rank());
  check_precision(config, setup.device);
  const SetupMessage message = parse_setup(distributed.wait_for("setup", 0));
  TrainingCheckpoint& state = setup.state;
  state.config = config;
  state.model.options = config.model;
  state.model.source_vocabulary =
      Vocabulary::from_serialized(distributed.wait_for("vocabulary/source", 0), "rank 0's source vocabulary");
  state.model.target_vocabulary =
      Vocabulary::from_serialized(distributed.wait_for("vocabulary/target", 0), "rank 0's target vocabulary");
  state.progress.step = message.step;
  state.progress.epoch = message.epoch;
  state.progress.batch_in_epoch = message.batch_in_epoch;
  state.progress.learning_rate = message.learning_rate;
  // Dropout: a stream of its own on every rank, continued differently on resume.
  torch::manual_seed(static_cast<uint64_t>(config.seed) * 1000003ULL + static_cast<uint64_t>(distributed.rank()) +
                     static_cast<uint64_t>(state.progress.step) * 7919ULL);
  state.model.network =
      Seq2Seq(config.model, state.model.source_vocabulary.size(), state.model.target_vocabulary.size());
  state.model.network->to(setup.device);
  setup.optimizer =
      std::make_unique<FusedAdam>(state.model.network->parameters(), torch::optim::AdamOptions(config.learning_rate));
  load_optimizer_bytes(distributed.wait_for("optimizer", 0), *setup.optimizer);

  // The machine's first rank opens (or prepares) the corpus before the machine's others map it.
  const int first_on_machine = distributed.rank() - distributed.local_rank();
  if (first_on_machine != distributed.rank()) distributed.wait_for(corpus_key(first_on_machine), first_on_machine);
  const PreparedCorpus prepared =
      open_training_corpus(config, {state.model.source_vocabulary, state.model.target_vocabulary},
                           /*trained_on_this_text=*/false, log);
  distributed.publish(corpus_key(distributed.rank()), "ready");
  use_training_corpus(config, prepared, setup);
  return setup;
}

void synchronize_weights(Distributed& distributed, TrainingSetup& setup) {
  distributed.broadcast(setup.state.model.network->parameters());
}

}  // namespace nmt
