#include "train/checkpoint.h"

#include <torch/torch.h>

#include "inference/checkpoint_format.h"
#include "inference/export.h"
#include "train/optimizer_state.h"
#include "util/device_rules.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {
namespace {

constexpr const char* kRandomStateRecord = "nmt.random_state";
constexpr const char* kCudaRandomStateRecord = "nmt.cuda_random_state";

}  // namespace

namespace {

// Each metric's record; a checkpoint written before they were stored has the best metric's alone,
// in best_score, has_best and validations_without_improvement.
void read_metric_records(const TensorFile& file, Metric best_metric, TrainingProgress& progress) {
  for (const auto& [name, metric] : metric_names()) {
    const std::string key = "metric." + name;
    if (!file.has_metadata(key + ".has_best")) continue;
    MetricRecord& record = progress.metrics[static_cast<size_t>(metric)];
    record.has_best = metadata_integer(file, key + ".has_best") != 0;
    record.best = metadata_real(file, key + ".best");
    record.stalled = metadata_integer(file, key + ".stalled");
  }
  if (!file.has_metadata("metric.bleu.has_best")) {
    progress.metrics[static_cast<size_t>(best_metric)] = {progress.has_best, progress.best_score,
                                                          progress.validations_without_improvement};
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainingCheckpoint& checkpoint,
                     torch::optim::Optimizer* optimizer) {
  TensorFile file;
  write_checkpoint_header(file, config_entries(checkpoint.config));
  file.add_bytes(kSourceVocabularyRecord, checkpoint.model.source_vocabulary.serialized());
  file.add_bytes(kTargetVocabularyRecord, checkpoint.model.target_vocabulary.serialized());
  const TrainingProgress& progress = checkpoint.progress;
  set_metadata_number(file, "step", progress.step);
  set_metadata_number(file, "epoch", progress.epoch);
  set_metadata_number(file, "batch_in_epoch", progress.batch_in_epoch);
  set_metadata_number(file, "has_best", static_cast<int64_t>(progress.has_best));
  set_metadata_number(file, "best_score", progress.best_score);
  set_metadata_number(file, "validations_without_improvement", progress.validations_without_improvement);
  set_metadata_number(file, "plateau_count", progress.plateau_count);
  set_metadata_number(file, "learning_rate", progress.learning_rate);
  for (const auto& [name, metric] : metric_names()) {
    const MetricRecord& record = progress.metrics[static_cast<size_t>(metric)];
    set_metadata_number(file, "metric." + name + ".has_best", static_cast<int64_t>(record.has_best));
    set_metadata_number(file, "metric." + name + ".best", record.best);
    set_metadata_number(file, "metric." + name + ".stalled", record.stalled);
  }
  file.add(kRandomStateRecord, random_state());
  if (const torch::Device device = checkpoint.model.network->parameters().front().device(); has_own_generator(device)) {
    file.add(kCudaRandomStateRecord, random_state(device));
  }
  Seq2Seq network = checkpoint.model.network;  // the same module, through a holder that is not const
  write_weights(file, *network);
  if (optimizer != nullptr) write_adam_state(file, dynamic_cast<torch::optim::Adam&>(*optimizer));
  write_checkpoint_atomic(file, path);
}

TrainingCheckpoint load_training_checkpoint(const std::string& path, const torch::Device& device,
                                            const std::string& remedy) {
  const TensorFile file = open_checkpoint(path, remedy);
  TrainingCheckpoint checkpoint;
  with_checkpoint_errors(
      path,
      [&] {
        if (is_export(file)) {
          throw std::runtime_error(path +
                                   ": an exported model (nmt export) holds no training state; use one of the "
                                   "run's checkpoints");
        }
        checkpoint.config = config_from_entries(read_config_entries(file));
        checkpoint.model = read_model(file, checkpoint.config.model, path, device);
        TrainingProgress& progress = checkpoint.progress;
        progress.step = metadata_integer(file, "step");
        progress.epoch = metadata_integer(file, "epoch");
        progress.batch_in_epoch = metadata_integer(file, "batch_in_epoch");
        progress.has_best = metadata_integer(file, "has_best") != 0;
        progress.best_score = metadata_real(file, "best_score");
        progress.validations_without_improvement = metadata_integer(file, "validations_without_improvement");
        progress.plateau_count = metadata_integer(file, "plateau_count");
        progress.learning_rate = metadata_real(file, "learning_rate");
        read_metric_records(file, checkpoint.config.best_metric, progress);
        // Undefined in a checkpoint converted from one written before they were stored, and the
        // GPU's in a run's on the CPU.
        if (file.has(kRandomStateRecord)) checkpoint.random_state = file.tensor(kRandomStateRecord);
        if (file.has(kCudaRandomStateRecord)) checkpoint.cuda_random_state = file.tensor(kCudaRandomStateRecord);
        checkpoint.optimizer_state = file.with_prefix("optimizer.");
      },
      remedy);
  return checkpoint;
}

int64_t read_checkpoint_step(const std::string& path) {
  const TensorFile file = open_checkpoint(path);
  int64_t step = 0;
  with_checkpoint_errors(path, [&] { step = metadata_integer(file, "step"); });
  return step;
}

void restore_optimizer(TrainingCheckpoint& checkpoint, const std::string& path, torch::optim::Adam& optimizer) {
  try {
    read_adam_state(checkpoint.optimizer_state, optimizer);
    checkpoint.optimizer_state = TensorFile();
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(path + ": cannot restore the optimizer state: " + error.what());
  }
}

}  // namespace nmt
