// nmt: the command line. Each subcommand lives in src/cli/ (its options and its work); the program
// is built from them in cli/program.cpp. This file parses and dispatches.
#include <spdlog/spdlog.h>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/program.h"
#include "util/blas_core.h"

using namespace nmt;

int main(int argc, char** argv) {
  std::string blas_note;  // logged at debug level once logging is set up
  try {
    blas_note = restart_for_blas(argv);  // may restart the program with OpenBLAS's right kernels
  } catch (const std::invalid_argument& error) {
    std::cerr << "nmt: " << error.what() << "\n";
    return 2;
  }
  cli::set_up_process();
  if (!blas_note.empty()) spdlog::debug("{}", blas_note);
  cli::Program program({argv[0], std::vector<std::string>(argv + 1, argv + argc)});
  if (!cli::config_files_valid(program.invocation.arguments)) return 2;
  if (const int status = cli::parse(program.app, program.invocation.arguments); status >= 0) return status;
  return cli::run(program.commands);
}
