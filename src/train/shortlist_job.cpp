#include "train/shortlist_job.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "inference/checkpoint_format.h"
#include "inference/model.h"
#include "train/setup.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

std::string make_shortlist(const ShortlistJob& job, spdlog::logger& log) {
  if (!fs::is_directory(job.model_dir)) {
    throw FileNotFound(job.model_dir + ": model directory not found (train one with nmt train)");
  }
  const std::string output = job.output.empty() ? (fs::path(job.model_dir) / kShortlistFile).string() : job.output;
  require_parent_directory(output, "--output");
  const std::string checkpoint = resolve_checkpoint(job.model_dir, job.checkpoint);
  if (!fs::is_regular_file(checkpoint)) {
    throw FileNotFound(checkpoint + ": checkpoint not found (--checkpoint best|last|PATH)");
  }
  // The run's configuration says which text it trained on and where its prepared corpus is.
  const TensorFile file = open_checkpoint(checkpoint);
  TrainConfig config;
  with_checkpoint_errors(checkpoint, [&] { config = config_from_entries(read_config_entries(file)); });
  const TranslationModel model = read_model(file, config.model, checkpoint, torch::kCPU);
  if (!job.train_source.empty()) config.train_source = job.train_source;
  if (!job.train_target.empty()) config.train_target = job.train_target;
  for (const auto& [key, value] :
       {std::pair{"train-source", config.train_source}, {"train-target", config.train_target}}) {
    for (const std::string& file : expand_file_list(value, key)) {
      if (!fs::exists(file)) {
        throw FileNotFound(std::string(key) + ": " + file +
                           ": file not found (run nmt shortlist where the model was trained, or give --" + key + ")");
      }
    }
  }
  set_threads(job.threads);
  const PreparedCorpus prepared = open_training_corpus(config, {model.source_vocabulary, model.target_vocabulary},
                                                       /*trained_on_this_text=*/false, log);
  const Shortlist shortlist =
      Shortlist::build(prepared.corpus, model.source_vocabulary, model.target_vocabulary, job.sizes, checkpoint);
  shortlist.write(output);
  log.info(
      "wrote {}: the {} most frequent target subwords and up to {} per source subword, from {} pairs; CPU batches "
      "of {}",
      output, shortlist.frequent().size(), job.sizes.translations, shortlist.pairs_counted(),
      job.sizes.batch_sentences > 0 ? "at most " + std::to_string(job.sizes.batch_sentences) + " sentences"
                                    : std::string("--batch-size sentences"));
  return output;
}

void write_shortlist(const TrainingSetup& setup, spdlog::logger& log) {
  const TrainingCheckpoint& state = setup.state;
  const std::string output = (fs::path(state.config.model_dir) / kShortlistFile).string();
  const Shortlist shortlist =
      Shortlist::build(setup.train_corpus, state.model.source_vocabulary, state.model.target_vocabulary,
                       ShortlistSizes{}, (fs::path(state.config.model_dir) / kBestCheckpoint).string());
  shortlist.write(output);
  log.info("wrote {} (translate --shortlist {})", output, output);
}

}  // namespace nmt
