// Everything before the first update, shared by `nmt train` (trainer.h) and the benchmark
// (nmt_bench train): threads, seed and device; the vocabularies trained (or reused from corpus-dir,
// or taken from last.ckpt on --resume); the training corpus prepared once and mapped
// (text/prepared_corpus.h) and the dev set encoded; the model built (or loaded) and its optimizer.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "text/corpus.h"
#include "text/corpus_mix.h"
#include "text/prepared_corpus.h"
#include "text/token_corpus.h"
#include "text/vocabulary.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "train/validator.h"

namespace spdlog {
class logger;
}

namespace nmt {

struct Batch;
class GradientReducer;

struct Vocabularies {
  Vocabulary source;
  Vocabulary target;  // the same as `source` with joint-vocab
};

// Trains the sentencepiece vocabularies of `config` on `text` and writes them into `directory`
// (vocab.joint.model, or vocab.source.model and vocab.target.model).
Vocabularies build_vocabularies(const TrainConfig& config, const ParallelText& text, const std::string& directory,
                                spdlog::logger& log);

// Where the prepared training corpus of `config` lives: corpus-dir (or model-dir)/train.corpus.
std::string prepared_corpus_path(const TrainConfig& config);

// The training data of a new run, made or reused in corpus-dir: the vocabularies (reused when the
// prepared corpus there was made from the same text with the same vocabulary settings, else
// trained on a sample of at most kVocabularySamplePairs pairs) and the prepared corpus. `nmt
// prepare` is this alone.
struct TrainingData {
  Vocabularies vocabularies;
  PreparedCorpus prepared;
};
constexpr int64_t kVocabularySamplePairs = 1000000;
TrainingData prepare_training_data(const TrainConfig& config, spdlog::logger& log);

// The prepared corpus of `config` for these vocabularies: mapped when corpus-dir holds a current,
// whole one, else prepared there first (a log line says why). `trained_on_this_text`: the
// vocabularies were trained on this text with config's settings (a new run's, not a checkpoint's),
// so that later new runs may reuse them.
PreparedCorpus open_training_corpus(const TrainConfig& config, const Vocabularies& vocabularies,
                                    bool trained_on_this_text, spdlog::logger& log);

struct TrainingSetup {
  torch::Device device = torch::kCPU;
  TrainingCheckpoint state;  // the configuration, the model and where the run stands
  std::unique_ptr<FusedAdam> optimizer;
  TokenCorpus train_corpus;          // mapped from the prepared corpus
  std::vector<int64_t> train_pairs;  // its pairs within max-length
  std::vector<CorpusShare> corpora;  // the same pairs by corpus, with their weights (text/corpus_mix.h)
  std::vector<DevSet> dev_sets;      // in memory, all of each used
};

// Sets setup's train_corpus (`prepared`'s), train_pairs and corpora for config's corpora and
// max-length; with train-temperature, the corpora's weights from their pairs within max-length.
void use_training_corpus(const TrainConfig& config, const PreparedCorpus& prepared, TrainingSetup& setup);

// Throws std::runtime_error naming the first training or dev file that cannot be opened.
void check_training_files(const TrainConfig& config);
// Throws std::invalid_argument when precision bf16 is asked of a device without full-speed bf16.
// For bf16 on a CPU it also turns off oneDNN's ITT task marking, unless the environment sets it.
void check_precision(const TrainConfig& config, const torch::Device& device);

// `config` must be validated. With `resume`, the model, vocabularies, progress and optimizer state
// come from model_dir/last.ckpt (whose fixed keys `config` must keep); otherwise the vocabularies
// are trained into model_dir and the model is new.
TrainingSetup set_up_training(const TrainConfig& config, bool resume, spdlog::logger& log);

// A mean loss above this many nats per target token gives the reference token a probability
// below e^-1000: no model that is learning has it, so the update is skipped as diverged.
constexpr double kDivergedLoss = 1000;

struct StepResult {
  double loss_sum = 0;       // the update's summed token loss (over every rank's batches)
  double clock = 0;          // the `clock` passed in, summed over ranks
  double gradient_norm = 0;  // of the update's gradient (all ranks'), before clipping
  std::string skipped;       // why the update was skipped (the weights are unchanged), or "" when made
};

// One update: for each of `batches` a teacher-forced forward pass, cross-entropy (label smoothing,
// padding ignored) and backward, the gradients adding up; with a `reducer` (gradient_reducer.h), the sum
// over every rank's batches; then gradient-norm clipping and the optimizer step. The loss is divided
// by `update_tokens`, the target tokens of the whole update (all ranks), so the gradient is the mean
// over them. A mean loss that is not finite or above kDivergedLoss per token, or a gradient norm that
// is not finite, skips the update (on every rank alike: the values compared are the summed ones).
StepResult train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      int64_t update_tokens, const TrainConfig& config, GradientReducer* reducer = nullptr,
                      double clock = 0);
// One batch, one process.
StepResult train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const Batch& batch,
                      const TrainConfig& config);

}  // namespace nmt
