#include "train/checkpoint.h"

#include <torch/torch.h>

#include "inference/checkpoint_format.h"
#include "inference/export.h"
#include "train/fused_adam.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {
namespace {

void write_double(torch::serialize::OutputArchive& archive, const std::string& key, double value) {
  archive.write(key, torch::tensor({value}, torch::kFloat64));
}

double read_double(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return tensor.item<double>();
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainingCheckpoint& checkpoint,
                     torch::optim::Optimizer* optimizer) {
  torch::serialize::OutputArchive archive;
  write_checkpoint_header(archive, config_entries(checkpoint.config));
  write_bytes(archive, "source_vocabulary", checkpoint.model.source_vocabulary.serialized());
  write_bytes(archive, "target_vocabulary", checkpoint.model.target_vocabulary.serialized());
  const TrainingProgress& progress = checkpoint.progress;
  archive.write("step", c10::IValue(progress.step));
  archive.write("epoch", c10::IValue(progress.epoch));
  archive.write("batch_in_epoch", c10::IValue(progress.batch_in_epoch));
  archive.write("has_best", c10::IValue(progress.has_best));
  write_double(archive, "best_score", progress.best_score);
  archive.write("validations_without_improvement", c10::IValue(progress.validations_without_improvement));
  archive.write("plateau_count", c10::IValue(progress.plateau_count));
  write_double(archive, "learning_rate", progress.learning_rate);
  archive.write("random_state", random_state());
  if (const torch::Device device = checkpoint.model.network->parameters().front().device(); device.is_cuda()) {
    archive.write("cuda_random_state", random_state(device));
  }

  torch::serialize::OutputArchive model_archive;
  checkpoint.model.network->save(model_archive);
  archive.write("model", model_archive);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
  write_archive_atomic(archive, path);
}

TrainingCheckpoint load_training_checkpoint(const std::string& path, const torch::Device& device,
                                            const std::string& remedy) {
  torch::serialize::InputArchive archive;
  open_checkpoint(path, device, archive, remedy);
  TrainingCheckpoint checkpoint;
  with_checkpoint_errors(
      path,
      [&] {
        if (is_export(archive)) {
          throw std::runtime_error(path +
                                   ": an exported model (nmt export) holds no training state; use one of the "
                                   "run's checkpoints");
        }
        checkpoint.config = config_from_entries(read_config_entries(archive));
        checkpoint.model = read_model(archive, checkpoint.config.model, path, device);
        c10::IValue value;
        TrainingProgress& progress = checkpoint.progress;
        archive.read("step", value), progress.step = value.toInt();
        archive.read("epoch", value), progress.epoch = value.toInt();
        archive.read("batch_in_epoch", value), progress.batch_in_epoch = value.toInt();
        archive.read("has_best", value), progress.has_best = value.toBool();
        progress.best_score = read_double(archive, "best_score");
        archive.read("validations_without_improvement", value),
            progress.validations_without_improvement = value.toInt();
        archive.read("plateau_count", value), progress.plateau_count = value.toInt();
        progress.learning_rate = read_double(archive, "learning_rate");
        archive.try_read("random_state", checkpoint.random_state);            // stays undefined in older checkpoints
        archive.try_read("cuda_random_state", checkpoint.cuda_random_state);  // and in a run's on the CPU
      },
      remedy);
  return checkpoint;
}

int64_t read_checkpoint_step(const std::string& path) {
  torch::serialize::InputArchive archive;
  open_checkpoint(path, torch::kCPU, archive);
  c10::IValue step;
  with_checkpoint_errors(path, [&] { archive.read("step", step); });
  return step.toInt();
}

void restore_optimizer(const std::string& path, torch::optim::Adam& optimizer, const torch::Device& device) {
  try {
    torch::serialize::InputArchive archive, optimizer_archive;
    archive.load_from(path, device);
    archive.read("optimizer", optimizer_archive);
    load_adam_state(optimizer_archive, optimizer);
  } catch (const c10::Error& error) {
    std::string message = error.what_without_backtrace();
    throw std::runtime_error(path + ": cannot restore the optimizer state: " + message.substr(0, message.find('\n')));
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(path + ": cannot restore the optimizer state: " + error.what());
  }
}

}  // namespace nmt
