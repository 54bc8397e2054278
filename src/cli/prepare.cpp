// nmt prepare: encode the training corpus once into corpus-dir, for training runs to reuse. It takes
// the options of train (and a configuration file's [train] section: cli/program.cpp).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "config/train_config.h"
#include "train/trainer.h"

namespace nmt::cli {

namespace {

struct PrepareCommand {
  TrainConfig config;
  bool dump_config = false;
};

}  // namespace

Command add_prepare(CLI::App& program) {
  auto prepare = std::make_shared<PrepareCommand>();
  CLI::App* command = program.add_subcommand(
      "prepare",
      "encode the training corpus once into corpus-dir (train.corpus and its vocabularies), for training runs to "
      "reuse; takes the options of train");
  command->fallthrough();  // --config after the command name reaches the program's option
  add_train_options(*command, prepare->config);
  command->add_flag("--dump-config", prepare->dump_config, "print the effective configuration and exit")
      ->configurable(false);
  return {command, [prepare] {
            if (prepare->dump_config) {
              std::cout << to_toml(prepare->config);
            } else {
              nmt::prepare(prepare->config);
            }
            return 0;
          }};
}

}  // namespace nmt::cli
