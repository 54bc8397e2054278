// nmt rerank: an n-best list rescored by several models (left-to-right and right-to-left), the
// best hypothesis of each sentence by the weighted sum of their scores (inference/rerank.h).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "inference/rerank.h"

namespace nmt::cli {

Command add_rerank(CLI::App& program) {
  auto job = std::make_shared<RerankJob>();
  CLI::App* command = program.add_subcommand(
      "rerank", "rescore an n-best list with several models; print the best hypothesis of each sentence");
  command->add_option("--model", job->options.models, "model directory; each one scores on its own")->required();
  command->add_option("--src", job->source_file, "source sentences, one per line")->required();
  command->add_option("--nbest", job->nbest_file, "their n-best list, as translate --n-best writes it")->required();
  command->add_option("--weights", job->weights, "one weight per --model (default: 1 each, or tuned)")->delimiter(',');
  command->add_option("--tune-src", job->tune_source, "tuning set: source sentences (a dev set)");
  command->add_option("--tune-nbest", job->tune_nbest, "tuning set: their n-best list");
  command->add_option("--tune-ref", job->tune_reference, "tuning set: references; the weights maximise BLEU on it");
  command->add_option("--output", job->output, "output file, or - for stdout")->capture_default_str();
  add_forced_decoding_options(*command, job->options);
  return {command, [job] {
            warn_if_slow_blas();
            rerank_files(*job, std::cout, std::cerr);
            return 0;
          }};
}

}  // namespace nmt::cli
