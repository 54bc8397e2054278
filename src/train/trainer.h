// The training loop: `nmt train`. Its parts, one file each: setup.h (everything before the first
// update, shared with the benchmark), master_setup.h (rank 0's model directory), validator.h (dev
// loss, perplexity, BLEU), stop_rules.h (steps, epochs, minutes, patience), run_log.h (train.log and
// metrics.jsonl), checkpoint.h; and training_processes.h, the roles of one process or of several
// ranks (data_parallel.h: distributed.h, the process group; gradient_reducer.h, the gradient
// all-reduce; replicas.h, rank 0's state handed to the others), which the loop never tells apart.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "config/train_config.h"
#include "train/distributed.h"

namespace nmt {

struct TrainRunOptions {
  bool resume = false;             // continue from model_dir/last.ckpt
  bool overwrite = false;          // start again even though model_dir holds a run
  DistributedOptions distributed;  // several ranks (distributed.h); unset: one process
  // Asked before each update of a run of one process: true stops the run there as a stop rule
  // would, last.ckpt written, so that --resume goes on from it (the Python module's Ctrl-C).
  std::function<bool()> interrupted;
};

struct TrainSummary {
  int64_t steps = 0;
  double best_score = 0;  // of config.best_metric
  double seconds = 0;
  std::string stop_reason;
};

// Trains per `config` (validated here). Writes into config.model_dir: vocabularies, config.toml,
// best.ckpt, last.ckpt, train.log, metrics.jsonl; and into corpus-dir (by default model_dir) the
// prepared corpus train.corpus and its vocabularies.
TrainSummary train(const TrainConfig& config, const TrainRunOptions& run);

// `nmt prepare`: the vocabularies and the prepared training corpus of `config` in its corpus-dir
// (or model-dir), for training runs to reuse (setup.h, prepare_training_data). Logs to stderr.
void prepare(const TrainConfig& config);

}  // namespace nmt
