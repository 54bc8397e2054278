// The subcommands of nmt, one file each (cli/train.cpp, cli/translate.cpp, ...): each declares its
// options on the program's CLI11 app and returns the work to run once the command line is parsed.
// main.cpp only builds the app from them, parses and dispatches (cli/program.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "config/translate_options.h"
#include "train/trainer.h"

namespace nmt::cli {

// The command line as typed: `train --nproc N` starts N copies of the program with it.
struct Invocation {
  std::string program;                 // argv[0]
  std::vector<std::string> arguments;  // argv[1..]
};

// One subcommand: its CLI11 app (parsed() once chosen) and its work, which returns the exit status
// and throws on errors (cli::run turns them into one line).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// What `nmt train` parsed; the Python module's nmt.train reads it and runs the training itself.
struct TrainCommand {
  TrainConfig config;
  TrainRunOptions run;
  bool dump_config = false;
  int nproc = 0;  // > 1: start this many ranks here and supervise them
};

Command add_train(CLI::App& program, const Invocation& invocation, std::shared_ptr<TrainCommand> train);
Command add_prepare(CLI::App& program);
Command add_translate(CLI::App& program);
Command add_evaluate(CLI::App& program);
Command add_serve(CLI::App& program);
Command add_average(CLI::App& program);
Command add_shortlist(CLI::App& program);
Command add_export(CLI::App& program);
Command add_convert(CLI::App& program);
Command add_score(CLI::App& program);
Command add_rerank(CLI::App& program);
Command add_synthesize(CLI::App& program);
// The options of the commands that score by forced decoding (score, rerank): length penalty, batch
// size, threads, device.
void add_forced_decoding_options(CLI::App& command, TranslateOptions& options);

// Inference runs on LibTorch's BLAS: a warning when it is the slow reference one (util/runtime.h).
void warn_if_slow_blas();

}  // namespace nmt::cli
