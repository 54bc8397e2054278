// nmt synthesize: a synthetic parallel corpus from monolingual text, by back-translation or
// forward translation, with sampling, beam search and noise (inference/synthesize.h).
#include <spdlog/spdlog.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/command.h"
#include "config/translate_options.h"
#include "inference/synthesize.h"

namespace nmt::cli {

Command add_synthesize(CLI::App& program) {
  auto job = std::make_shared<SynthesizeJob>();
  CLI::App* command = program.add_subcommand(
      "synthesize",
      "make a synthetic parallel corpus: translate monolingual text (back-translation with a reverse model, or "
      "forward translation for self-training and distillation) and write both sides");
  CLI::Option* model =
      command->add_option("--model", job->options.models, "model directory or exported model; several: an ensemble");
  command->add_option("--input", job->input, "monolingual text, one sentence per line")->required();
  command
      ->add_option("--translations", job->translations,
                   "instead of --model: the input's translations, made before (one a line), to write as a corpus "
                   "with --noise-*: the same bytes as searching again with that noise and --seed")
      ->excludes(model);
  command->add_option("--source-output", job->source_output, "the synthetic corpus's source side")->required();
  command->add_option("--target-output", job->target_output, "its target side, line by line")->required();
  command
      ->add_option("--direction", job->direction,
                   "back: the input is target-language text and the model translates it into the source language "
                   "(back-translation); forward: the input is source-language text (self-training, distillation)")
      ->check(CLI::IsMember({"back", "forward"}))
      ->capture_default_str();
  command
      ->add_option("--noise-delete", job->noise.delete_probability,
                   "on the source side: the probability of deleting each word")
      ->capture_default_str();
  command->add_option("--noise-blank", job->noise.blank_probability, "... of replacing a word with --noise-filler")
      ->capture_default_str();
  command->add_option("--noise-filler", job->noise.blank, "the word that replaces one")->capture_default_str();
  command
      ->add_option("--noise-shift", job->noise.max_shift,
                   "... the farthest a word moves when the words are shuffled (0 = order kept)")
      ->capture_default_str();
  // The decoding options, which do nothing without a model to decode with: every one
  // add_translate_options adds but --seed (the noise draws from it) and --quiet.
  std::set<std::string> before;
  for (const CLI::Option* option : command->get_options()) before.insert(option->get_single_name());
  add_translate_options(*command, job->options);
  auto decoding = std::make_shared<std::vector<std::string>>();
  for (const CLI::Option* option : command->get_options()) {
    const std::string& name = option->get_single_name();
    if (before.count(name) == 0 && name != "seed" && name != "quiet") decoding->push_back("--" + name);
  }
  return {command, [job, command, decoding] {
            if (job->translations.empty()) {
              warn_if_slow_blas();
            } else {
              for (const std::string& option : *decoding) {
                if (command->count(option) > 0) {
                  spdlog::warn("synthesize: {} does nothing with --translations: no model translates", option);
                }
              }
            }
            const SynthesizeSummary summary = synthesize(*job);
            spdlog::info(
                "{} lines: {} pairs written to {} and {} ({} skipped: an empty line or translation); "
                "origin in {}.origin.json",
                summary.lines, summary.pairs, job->source_output, job->target_output, summary.skipped,
                job->source_output);
            return 0;
          }};
}

}  // namespace nmt::cli
