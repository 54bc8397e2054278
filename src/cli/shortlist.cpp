// nmt shortlist: a model's lexical shortlist, for translate/serve --shortlist (search/shortlist.h).
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/command.h"
#include "train/shortlist_job.h"

namespace nmt::cli {

Command add_shortlist(CLI::App& program) {
  auto job = std::make_shared<ShortlistJob>();
  CLI::App* command = program.add_subcommand(
      "shortlist",
      "build a lexical shortlist from a model's training corpus, for translate --shortlist (faster decoding)");
  command->add_option("--model", job->model_dir, "model directory (from nmt train)")->required();
  command->add_option("--checkpoint", job->checkpoint, "best, last or a checkpoint path: its vocabularies")
      ->capture_default_str();
  command->add_option("--output", job->output, "where to write (default MODEL/shortlist.bin)");
  command
      ->add_option("--translations", job->sizes.translations,
                   "target subwords kept for each source subword (by Dice co-occurrence)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--frequent", job->sizes.frequent, "most frequent target subwords, in every batch's list")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--batch-sentences", job->sizes.batch_sentences,
                   "sentences a CPU batch holds at most when translating through it (0 = translate's --batch-size)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--max-pairs", job->sizes.max_pairs, "training pairs counted at most, evenly spread")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--train-source", job->train_source, "count this text instead of the run's train-source");
  command->add_option("--train-target", job->train_target, "... and this instead of its train-target");
  command->add_option("--threads", job->threads, "threads for preparing the corpus (0 = number of cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  return {command, [job] {
            make_shortlist(*job, *spdlog::default_logger());
            return 0;
          }};
}

}  // namespace nmt::cli
