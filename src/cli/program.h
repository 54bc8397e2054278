// The program around the subcommands: the top-level app and its --config, the checks made before
// parsing, parse errors and the one place where a command's exception becomes a message and an
// exit status.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"

namespace nmt::cli {

// The program's app with every command (main.cpp, and nmt.train in the Python module). Not
// copyable: the commands hold references into it.
struct Program {
  explicit Program(Invocation invocation);
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const Invocation invocation;
  CLI::App app;
  std::shared_ptr<TrainCommand> train = std::make_shared<TrainCommand>();  // what train parsed
  std::vector<Command> commands;
};

// Logs to standard error (standard output carries translations and scores) at the level of
// SPDLOG_LEVEL (default info), and guards the streams.
void set_up_process();

// The top-level app: its description, --config FILE (TOML; its [train] section also serves
// `prepare`, whose app is given) and no unknown keys.
void configure_program(CLI::App& program, const CLI::App& prepare);

// Checks each --config file named in `arguments` for what the TOML reader lets pass (a key given
// twice, an open quote). Prints the error and returns false when one fails.
bool config_files_valid(const std::vector<std::string>& arguments);

// Parses `arguments` (argv[1..]). Returns -1 when a command was chosen, otherwise the exit status:
// 0 after --help, non-zero after an error printed with a pointer to the command's --help.
int parse(CLI::App& program, std::vector<std::string> arguments);

// Runs the chosen command: an exception becomes one line on standard error and exit status 1.
int run(const std::vector<Command>& commands);

}  // namespace nmt::cli
