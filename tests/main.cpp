// The suite's main: Catch's, after the restart that gives OpenBLAS this CPU's kernels
// (util/blas_core.h), which the nmt processes the tests start then inherit; so do the ranks that
// the tests start by hand (--rank, as torchrun would) inherit the run's secret.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "util/blas_core.h"

int main(int argc, char** argv) {
  try {
    nmt::restart_for_blas(argv);
  } catch (const std::invalid_argument& error) {
    std::cerr << "nmt_tests: " << error.what() << "\n";
    return 2;
  }
  setenv("NMT_RENDEZVOUS_SECRET", "the secret of the suite's distributed runs", 0);
  return Catch::Session().run(argc, argv);
}
