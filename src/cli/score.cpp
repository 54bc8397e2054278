// nmt score: forced decoding of given translations, one score line per sentence pair, for reranking
// and corpus filtering (inference/commands.h, search/forced_decoding.h).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "config/fields.h"
#include "inference/commands.h"

namespace nmt::cli {

void add_forced_decoding_options(CLI::App& command, TranslateOptions& options) {
  OptionAdder adder{command};
  adder("length-penalty", options.search.length_penalty,
        "GNMT length penalty alpha of the scores, as translate scores (0 = none)");
  adder("batch-size", options.batching.batch_size, "sentence pairs per batch");
  adder("target-language", options.text.target_language,
        "the target language of the translations, for a multilingual model (trained with train-languages; \"\": "
        "its only one)");
  adder("threads", options.threads, "CPU threads (0 = number of cores)");
  adder("device", options.device, "cpu, cuda, or cuda:N (GPU N of those CUDA_VISIBLE_DEVICES shows)");
  check_device_option(command);
}

Command add_score(CLI::App& program) {
  auto job = std::make_shared<ScoreJob>();
  CLI::App* command = program.add_subcommand(
      "score", "score given translations: 'score<TAB>log-probability<TAB>mean per token' per line pair");
  command
      ->add_option("--model", job->options.models,
                   "model directory (from nmt train) or exported model file; several score as an ensemble")
      ->required();
  command->add_option("--checkpoint", job->options.checkpoints,
                      "best (default), last, or a checkpoint path; several make an ensemble");
  command->add_option("--src", job->source_file, "source sentences, one per line")->required();
  command->add_option("--tgt", job->target_file, "their translations, line by line")->required();
  command->add_option("--output", job->output, "output file, or - for stdout")->capture_default_str();
  command->add_flag("--per-token", job->per_token, "a fourth column: each target token's log-probability, EOS last");
  add_forced_decoding_options(*command, job->options);
  return {command, [job] {
            warn_if_slow_blas();
            score_files(*job, std::cout);
            return 0;
          }};
}

}  // namespace nmt::cli
