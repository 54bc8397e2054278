// nmt evaluate: corpus BLEU and chrF of a hypothesis file against references (sacreBLEU's numbers
// and signatures), or of a model's translation of a source file (inference/commands.h).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "config/translate_options.h"
#include "inference/commands.h"

namespace nmt::cli {

Command add_evaluate(CLI::App& program) {
  auto job = std::make_shared<EvaluateJob>();
  CLI::App* command = program.add_subcommand("evaluate", "corpus BLEU and chrF (sacreBLEU-compatible)");
  command->add_option("--hyp", job->hypothesis_files, "hypothesis file (detokenized)");
  command->add_option("--ref", job->reference_files, "reference file(s)");
  command->add_flag("--lowercase", job->bleu.lowercase, "case-insensitive BLEU");
  command->add_option("--tokenize", job->tokenize, "BLEU tokenizer")
      ->check(CLI::IsMember({"13a", "none"}))
      ->capture_default_str();
  command->add_flag("--json", job->json, "machine-readable output");
  command->add_option("--model", job->translate.models,
                      "translate --src with this model (several: an ensemble), then score");
  command->add_option("--src", job->source_file, "source file to translate (with --model)");
  command->add_option("--output", job->output, "with --model: also write the translation here");
  add_translate_options(*command, job->translate);
  return {command, [job] {
            warn_if_slow_blas();
            evaluate_files(*job, std::cout);
            return 0;
          }};
}

}  // namespace nmt::cli
