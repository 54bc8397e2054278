// The training loop: `nmt train`.
#pragma once

#include <string>

#include "config/train_config.h"
#include "model/seq2seq.h"
#include "text/corpus.h"
#include "text/vocabulary.h"

namespace torch::optim {
class Optimizer;
}
namespace spdlog {
class logger;
}

namespace nmt {

struct Batch;

struct TrainRunOptions {
  bool resume = false;     // continue from model_dir/last.ckpt
  bool overwrite = false;  // start again even though model_dir holds a run
};

struct TrainSummary {
  int64_t steps = 0;
  double best_score = 0;       // of config.best_metric
  double seconds = 0;
  std::string stop_reason;
};

struct Vocabularies {
  Vocabulary source;
  Vocabulary target;  // the same as `source` with joint-vocab
};

// Trains the sentencepiece vocabularies of `config` on `text` and writes them into
// config.model_dir (vocab.joint.model, or vocab.source.model and vocab.target.model).
Vocabularies build_vocabularies(const TrainConfig& config, const ParallelText& text, spdlog::logger& log);

// One update: teacher-forced forward pass, cross-entropy (label smoothing, padding ignored),
// backward, gradient-norm clipping, optimizer step. Returns the batch's summed token loss.
// Throws when the gradient norm is not finite, before the weights change. Shared by the training
// loop and the benchmark, so both time the same work.
double train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const Batch& batch, const TrainConfig& config,
                  int64_t step);

// Trains per `config` (validated here). Writes into config.model_dir: vocabularies, config.toml,
// best.ckpt, last.ckpt, train.log, metrics.jsonl.
TrainSummary train(const TrainConfig& config, const TrainRunOptions& run);

}  // namespace nmt
