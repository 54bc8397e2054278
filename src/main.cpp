// nmt: the command line. Each subcommand lives in src/cli/ (its options and its work); this file
// builds the program from them, parses and dispatches.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/program.h"

using namespace nmt;

int main(int argc, char** argv) {
  cli::set_up_process();
  const cli::Invocation invocation{argv[0], std::vector<std::string>(argv + 1, argv + argc)};
  if (!cli::config_files_valid(invocation.arguments)) return 2;

  CLI::App program{
      "nmt: attentional GRU neural machine translation (train, prepare, translate, evaluate, score, "
      "rerank, average, serve)",
      "nmt"};
  const std::vector<cli::Command> commands = {
      cli::add_train(program, invocation),
      cli::add_prepare(program),
      cli::add_translate(program),
      cli::add_evaluate(program),
      cli::add_serve(program),
      cli::add_average(program),
      cli::add_score(program),
      cli::add_rerank(program),
  };
  cli::configure_program(program, *commands[1].app);
  if (const int status = cli::parse(program, invocation.arguments); status >= 0) return status;
  return cli::run(commands);
}
