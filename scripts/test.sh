#!/usr/bin/env bash
# The test command: set-up (idempotent), the Release build of nmt, its test binary and the Python
# module, the formatting check (.clang-format) and the fast suite through CTest: every Catch2 case
# not tagged [slow] or [cuda], and the pytest suite of tests/python. Minutes on two cores once
# built. The deep checks (the [slow] cases, the AVX2 kernels, a real full disk, the page in a
# browser, the pip-installed module, the sanitizers, fuzzing, LibTorch 2.x) are
# scripts/check_all.sh.
# The last lines name each check and what became of it.
# Usage: scripts/test.sh [CTEST_ARGUMENTS...]    e.g. scripts/test.sh -R BLEU
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/checks.sh"

if run_check set-up "$root/scripts/setup.sh" && run_check build env -u NMT_LIBTORCH -u NMT_BUILD_DIR "$root/scripts/build.sh" nmt nmt_tests; then
  run_check format "$root/scripts/format.sh" --check
  export_blas_core "$root/build/nmt"
  run_check suite ctest --test-dir "$root/build" -LE slow --output-on-failure -j 2 "$@"
else
  skip_check format "not run: set-up or build failed"
  skip_check suite "not run: set-up or build failed"
fi
print_summary test
