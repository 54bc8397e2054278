// nmt export: an inference-only model file, int8 or float32 (inference/export.h).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "inference/export.h"

namespace nmt::cli {

Command add_export(CLI::App& program) {
  auto job = std::make_shared<ExportJob>();
  CLI::App* command = program.add_subcommand(
      "export", "write an inference-only model file (int8: a quarter of the weights' bytes) for translate and serve");
  command->add_option("--model", job->model_dir, "model directory (from nmt train)")->required();
  command->add_option("--checkpoint", job->checkpoint, "best, last or a checkpoint path")->capture_default_str();
  command
      ->add_option("--compute-type", job->compute_type,
                   "int8: weight matrices as int8 rows with a scale each; float32: the weights as trained")
      ->check(CLI::IsMember({"int8", "float32"}))
      ->capture_default_str();
  command->add_option("--output", job->output, "the file to write; translate and serve take it as --model")->required();
  command->add_flag("--force", job->force, "replace --output if it exists");
  return {command, [job] {
            std::cout << export_model(*job) << "\n";
            return 0;
          }};
}

}  // namespace nmt::cli
