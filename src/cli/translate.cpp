// nmt translate: text files (or standard input) through a trained model or an ensemble, with
// n-best lists, scores, attention heatmaps and alignments (inference/commands.h).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "config/translate_options.h"
#include "inference/commands.h"

namespace nmt::cli {

Command add_translate(CLI::App& program) {
  auto job = std::make_shared<TranslateJob>();
  CLI::App* command = program.add_subcommand("translate", "translate text files with a trained model");
  command
      ->add_option(
          "--model", job->options.models,
          "model directory (from nmt train) or exported model file (nmt export); several decode as an ensemble")
      ->required();
  command->add_option("--input", job->inputs, "input files, or - for stdin (default)");
  command->add_option("--output", job->output, "output file, or - for stdout")->capture_default_str();
  command->add_option("--output-dir", job->output_dir, "with several inputs: one INPUT_NAME.hyp each here");
  command->add_option("--n-best", job->options.search.n_best, "hypotheses per sentence (lines 'i ||| text ||| score')")
      ->capture_default_str();
  command->add_flag("--with-scores", job->outputs.with_scores, "prefix each output line with its score and a tab");
  command
      ->add_option_function<std::string>(
          "--output-format", [job](const std::string& format) { job->outputs.jsonl = format == "jsonl"; },
          "text: the translations (and what the options add); jsonl: one JSON object a line with the text, score, "
          "confidence, each word's probability, the sentences, those cut at a cap (and the alignment with --alignment)")
      ->check(CLI::IsMember({"text", "jsonl"}))
      ->default_str("text");
  command->add_option("--attention-dir", job->outputs.attention_dir,
                      "write an SVG heatmap and a JSON matrix per sentence");
  command->add_flag("--alignment", job->outputs.alignment,
                    "print the hard alignment (i-j pairs) after each output line");
  command->add_option("--prefix", job->prefix_file,
                      "target prefixes, one line per input line (empty: none): each output starts with its line's");
  command->add_option("--constraints", job->constraints_file,
                      "terminology constraints, one line per input line, phrases separated by tabs (empty: none): "
                      "each output contains all its line's phrases (beam search)");
  command->add_flag("--list-languages", job->list_languages,
                    "print the target languages of a multilingual model (one a line, for --target-language) and "
                    "translate nothing");
  add_translate_options(*command, job->options);
  return {command, [job] {
            warn_if_slow_blas();
            translate_files(*job, std::cout);
            return 0;
          }};
}

}  // namespace nmt::cli
