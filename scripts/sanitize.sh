#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: a build in
# build-sanitize/ with -DNMT_SANITIZE=address,undefined (GCC, like the main build; no tcmalloc),
# then CTest there, every case but those that kill processes to time how the rest ends (label
# `slow-kill`: what they check is timing, and the slow-cases check runs them). A sanitizer report
# ends the process that makes it, so the test fails. The build is -O1 -g1, as the sanitizers'
# documentation advises (line tables are enough to name every frame of a report; docs/testing.md
# has what it saves).
# Usage: scripts/sanitize.sh [CTEST_ARGUMENTS...]    e.g. scripts/sanitize.sh -R faults
# (NMT_BUILD_JOBS: compile jobs, default 2)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-sanitize"
"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DNMT_SANITIZE=address,undefined -DNMT_PYTHON=OFF \
  > "$root/build-sanitize.configure.log" 2>&1 || { cat "$root/build-sanitize.configure.log"; exit 1; }
rm -f "$root/build-sanitize.configure.log"
cmake --build "$build" -j "${NMT_BUILD_JOBS:-2}" --target nmt nmt_tests
# Leaks are checked too; a report names the test and the allocation's stack.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_init_order=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
cd "$build"
ctest --output-on-failure -j 2 -LE kill "$@"
