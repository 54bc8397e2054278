// nmt average: the mean of the weights of a run's last checkpoints (train/average.h).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "train/average.h"

namespace nmt::cli {

Command add_average(CLI::App& program) {
  auto job = std::make_shared<AverageJob>();
  CLI::App* command =
      program.add_subcommand("average", "average the weights of the last checkpoints of a run (keep-checkpoints)");
  command->add_option("--model", job->model_dir, "model directory (from nmt train)")->required();
  CLI::Option* last = command->add_option("--last", job->last, "the newest N step-*.ckpt (0 = all kept)")
                          ->check(CLI::NonNegativeNumber)
                          ->capture_default_str();
  command->add_option("--checkpoints", job->checkpoints, "these checkpoint files instead")->excludes(last);
  command->add_option("--output", job->output, "where to write (default MODEL/averaged.ckpt)");
  return {command, [job] {
            warn_if_slow_blas();
            run_average(*job, std::cout);
            return 0;
          }};
}

}  // namespace nmt::cli
