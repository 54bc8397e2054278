// nmt: the command line. Each subcommand lives in src/cli/ (its options and its work); the program
// is built from them in cli/program.cpp. This file parses and dispatches.
#include <string>
#include <vector>

#include "cli/program.h"

using namespace nmt;

int main(int argc, char** argv) {
  cli::set_up_process();
  cli::Program program({argv[0], std::vector<std::string>(argv + 1, argv + argc)});
  if (!cli::config_files_valid(program.invocation.arguments)) return 2;
  if (const int status = cli::parse(program.app, program.invocation.arguments); status >= 0) return status;
  return cli::run(program.commands);
}
