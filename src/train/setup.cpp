#include "train/setup.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "kernels/dispatch.h"
#include "text/batching.h"
#include "train/loss.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

Vocabularies build_vocabularies(const TrainConfig& config, const ParallelText& text, spdlog::logger& log) {
  VocabularyTrainingOptions options{config.vocab_type, config.vocab_size, config.seed, std::max(1, config.threads)};
  const fs::path dir(config.model_dir);
  Vocabularies vocabularies;
  if (config.joint_vocab) {
    log.info("training a joint {} vocabulary of up to {} pieces", to_string(config.vocab_type), config.vocab_size);
    const std::string proto = train_vocabulary({&text.source, &text.target}, options);
    write_file_atomic((dir / "vocab.joint.model").string(), proto);
    vocabularies.source = Vocabulary::from_serialized(proto, (dir / "vocab.joint.model").string());
    vocabularies.target = vocabularies.source;
  } else {
    log.info("training source and target {} vocabularies of up to {} pieces", to_string(config.vocab_type),
             config.vocab_size);
    const std::string source_proto = train_vocabulary({&text.source}, options);
    const std::string target_proto = train_vocabulary({&text.target}, options);
    write_file_atomic((dir / "vocab.source.model").string(), source_proto);
    write_file_atomic((dir / "vocab.target.model").string(), target_proto);
    vocabularies.source = Vocabulary::from_serialized(source_proto, (dir / "vocab.source.model").string());
    vocabularies.target = Vocabulary::from_serialized(target_proto, (dir / "vocab.target.model").string());
  }
  log.info("vocabulary sizes: source {}, target {}", vocabularies.source.size(), vocabularies.target.size());
  return vocabularies;
}

TrainingSetup set_up_training(const TrainConfig& config, bool resume, spdlog::logger& log) {
  set_threads(config.threads);
  set_seed(config.seed);
  TrainingSetup setup;
  setup.device = parse_device(config.device);
  if (std::string warning = slow_blas_warning(); !warning.empty()) log.warn("{}", warning);
  log.info("LibTorch {} threads, device {}, CPU kernels {}", torch::get_num_threads(), config.device,
           kernels::to_string(kernels::kernel_level()));

  // Data: checked before any time is spent on vocabularies or models.
  CorpusStats train_stats, dev_stats;
  ParallelText train_text = read_parallel(config.train_source, config.train_target, train_stats);
  setup.dev_text = read_parallel(config.dev_source, config.dev_target, dev_stats);
  if (train_text.source.empty()) {
    throw std::runtime_error(config.train_source + ": no training pairs left after skipping empty lines");
  }
  if (setup.dev_text.source.empty()) throw std::runtime_error(config.dev_source + ": the development set is empty");

  TrainingCheckpoint& state = setup.state;
  const std::string last_path = (fs::path(config.model_dir) / kLastCheckpoint).string();
  if (resume) {
    state = load_training_checkpoint(last_path, setup.device);
    check_resumable(config, state.config, last_path);
    log.info("resuming from {} at step {} (epoch {}, batch {})", last_path, state.progress.step,
             state.progress.epoch + 1, state.progress.batch_in_epoch);
  } else {
    Vocabularies vocabularies = build_vocabularies(config, train_text, log);
    state.model.source_vocabulary = vocabularies.source;
    state.model.target_vocabulary = vocabularies.target;
    state.model.network = Seq2Seq(config.model, vocabularies.source.size(), vocabularies.target.size());
    state.model.network->to(setup.device);
    state.progress.learning_rate = config.learning_rate;
  }
  state.config = config;  // schedule, limits and paths may change on resume
  state.model.options = config.model;
  Seq2Seq& model = state.model.network;
  setup.optimizer = std::make_unique<FusedAdam>(model->parameters(), torch::optim::AdamOptions(config.learning_rate));
  if (resume) restore_optimizer(last_path, *setup.optimizer, setup.device);

  const Vocabulary& source_vocabulary = state.model.source_vocabulary;
  const Vocabulary& target_vocabulary = state.model.target_vocabulary;
  setup.train_examples =
      encode_parallel(train_text, source_vocabulary, target_vocabulary, config.max_length, train_stats);
  log.info("training pairs: {} read, {} kept, {} skipped as empty, {} skipped as longer than {} subwords",
           train_stats.lines, train_stats.kept, train_stats.empty, train_stats.too_long, config.max_length);
  if (setup.train_examples.empty()) {
    throw std::runtime_error("no training pairs within max-length " + std::to_string(config.max_length));
  }
  // Dev pairs are all kept (a cap far above max-length) so that dev BLEU covers the whole set.
  setup.dev_examples =
      encode_parallel(setup.dev_text, source_vocabulary, target_vocabulary, std::numeric_limits<int>::max(), dev_stats);
  log.info("dev pairs: {} read, {} kept ({} empty skipped)", dev_stats.lines, dev_stats.kept, dev_stats.empty);

  int64_t parameter_count = 0;
  for (const auto& parameter : model->parameters()) parameter_count += parameter.numel();
  log.info("model: {} attention, {} parameters", config.model.attention, parameter_count);
  return setup;
}

double train_step(Seq2Seq& model, torch::optim::Optimizer& optimizer, const Batch& batch, const TrainConfig& config,
                  int64_t step) {
  DecoderOutput out = model(batch.source, batch.source_lengths, batch.target_input, config.teacher_forcing);
  const SequenceLoss loss = sequence_loss(*model->decoder, out, batch.target_output, config.label_smoothing);
  // Gradients set to none rather than filled with zeros: backward then writes them instead of
  // adding into zeros (one pass over every parameter fewer, each way).
  model->zero_grad(/*set_to_none=*/true);
  (loss.sum / static_cast<double>(loss.tokens)).backward();
  // clip_grad_norm_ with an infinite threshold only measures the norm.
  const double gradient_norm = torch::nn::utils::clip_grad_norm_(
      model->parameters(), config.clip_norm > 0 ? config.clip_norm : std::numeric_limits<double>::infinity());
  if (!std::isfinite(gradient_norm)) {
    // Stop before the update: the weights and last.ckpt stay as they were.
    throw std::runtime_error("training diverged at step " + std::to_string(step + 1) +
                             " (non-finite gradient norm); lower learning-rate or set clip-norm, then --resume");
  }
  optimizer.step();
  return loss.sum.item<double>();
}

}  // namespace nmt
