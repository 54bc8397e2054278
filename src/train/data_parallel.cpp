// One rank of a c10d data parallel training run, in the roles of training_processes.h.
#include "train/data_parallel.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "text/special_tokens.h"
#include "train/master_setup.h"
#include "train/replicas.h"
#include "util/runtime.h"

namespace nmt {

// The gradient all-reduce's bucket size (DistributedDataParallel's default is 25 MB): small enough
// that the first buckets go while backward still runs, large enough for few calls.
constexpr int64_t kBucketBytes = int64_t{4} << 20;

namespace {

// The embeddings whose gradients are nonzero only in the rows a batch looks up: the source one, and
// the target one unless it is also the output layer.
std::vector<torch::Tensor> row_sparse_embeddings(Seq2Seq& model, const ModelOptions& options) {
  std::vector<torch::Tensor> embeddings = {model->encoder->embedding->weight};
  if (!options.tie_embeddings) embeddings.push_back(model->decoder->embedding->weight);
  return embeddings;
}

// The sorted ids that batches[first, first + count) look up in each of row_sparse_embeddings: the
// source ids with end-of-sentence and padding, and the target inputs with beginning-of-sentence.
std::vector<torch::Tensor> embedding_rows(const TokenCorpus& corpus, const std::vector<std::vector<int64_t>>& batches,
                                          int64_t first, int64_t count, const ModelOptions& options) {
  std::vector<torch::Tensor> rows;
  for (const bool source : {true, false}) {
    if (!source && options.tie_embeddings) break;
    std::set<int64_t> ids = {kPadId, kUnkId, kBosId, kEosId};
    for (int64_t b = first; b < first + count; ++b) {
      for (int64_t pair : batches[b]) {
        for (int64_t id : source ? corpus.source(pair) : corpus.target(pair)) ids.insert(id);
      }
    }
    rows.push_back(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong));
  }
  return rows;
}

// The other ranks write nothing; their warnings and errors go to stderr.
std::shared_ptr<spdlog::logger> make_worker_log(int rank) {
  auto log = std::make_shared<spdlog::logger>("rank " + std::to_string(rank),
                                              std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_pattern("[%Y-%m-%d %H:%M:%S] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  log->set_level(spdlog::level::warn);
  return log;
}

}  // namespace

DataParallelProcesses::DataParallelProcesses(const DistributedOptions& options, const TrainConfig& config)
    : options_(options), distributed_(options, parse_device(config.device, options.local_rank)) {}

TrainingSetup DataParallelProcesses::set_up(const TrainConfig& config, const TrainRunOptions& run) {
  TrainingSetup setup;
  if (is_master()) {
    setup = set_up_master(config, run, lock_, run_log_);
    publish_setup(distributed_, setup);
  } else {
    worker_log_ = make_worker_log(rank());
    setup = receive_setup(config, distributed_, *worker_log_);
  }
  model_options_ = config.model;
  model_ = setup.state.model.network;
  synchronize_weights(distributed_, setup);
  reducer_.emplace(distributed_, model_->parameters(), kBucketBytes, row_sparse_embeddings(model_, config.model));
  log().info("distributed: {} ranks ({}, master {}:{}), {} batches of {} tokens per update, gradients in {} buckets",
             world_size(), distributed_.backend(), options_.master_addr, options_.master_port,
             world_size() * config.accumulate, config.batch_tokens, reducer_->bucket_count());
  return setup;
}

void DataParallelProcesses::begin_update(int64_t step, const TokenCorpus& corpus,
                                         const std::vector<std::vector<int64_t>>& batches, int64_t first,
                                         int64_t count) {
  distributed_.announce_step(step);
  reducer_->set_rows(embedding_rows(corpus, batches, first, count, model_options_));
}

StepResult DataParallelProcesses::update(TrainingSetup& setup, const std::vector<Batch>& batches, int64_t update_tokens,
                                         const TrainConfig& config, const std::function<double()>& elapsed) {
  // Every rank's clock is summed with the gradients: rank 0's alone counts.
  return train_step(setup.state.model.network, *setup.optimizer, batches, update_tokens, config, &*reducer_,
                    is_master() ? elapsed() : 0.0);
}

void DataParallelProcesses::end_update(int64_t step) {
  if (options_.check_replicas > 0 && step % options_.check_replicas == 0) {
    distributed_.check_same_on_every_rank(model_->parameters(), step);
  }
}

ValidationDecision parse_decision(const std::string& text) {
  constexpr size_t kMaxReason = 4096;
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    ValidationDecision decision{json.at("learning_rate").get<double>(), json.at("stop_reason").get<std::string>(),
                                json.at("divergence").get<std::string>()};
    if (!(std::isfinite(decision.learning_rate) && decision.learning_rate >= 0) ||
        decision.stop_reason.size() > kMaxReason || decision.divergence.size() > kMaxReason) {
      throw std::runtime_error("a value out of range");
    }
    return decision;
  } catch (const std::exception& error) {
    throw std::runtime_error(std::string("rank 0's validation decision read from the rendezvous store is not valid (") +
                             error.what() + "): is another process writing to the store's port?");
  }
}

ValidationDecision DataParallelProcesses::decide(int64_t step, const std::function<ValidationDecision()>& validate) {
  distributed_.check_same_on_every_rank(model_->parameters(), step);
  const std::string decision_key = "decision/" + std::to_string(step);
  ValidationDecision decision;
  if (is_master()) {
    decision = validate();
    distributed_.publish(decision_key, nlohmann::json{{"learning_rate", decision.learning_rate},
                                                      {"stop_reason", decision.stop_reason},
                                                      {"divergence", decision.divergence}}
                                           .dump());
  } else {
    // Rank 0 validates meanwhile; its learning-rate decay, early stop and divergence hold for all.
    decision = parse_decision(distributed_.wait_for(decision_key, 0));
  }
  // Every rank ends with the divergence's error at once: rank 0, which hosts the store, waits until
  // the others have read it (rather than leaving them to find it gone).
  if (!decision.divergence.empty()) distributed_.finish();
  return decision;
}

void DataParallelProcesses::finish(int64_t updates, double seconds) {
  const double update_count = static_cast<double>(std::max<int64_t>(1, updates));
  log().info(
      "distributed: {:.1f} MB all-reduced per update on average; {:.1f} s of {:.1f} waiting for all-reduces "
      "after backward ({:.1f} ms per update)",
      reducer_->mean_bytes_per_update() / 1e6, reducer_->wait_seconds(), seconds,
      1000 * reducer_->wait_seconds() / update_count);
  distributed_.finish();
}

}  // namespace nmt
