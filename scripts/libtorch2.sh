#!/usr/bin/env bash
# The whole suite, [slow] cases included, against LibTorch 2.x: fetched once by
# scripts/get_libtorch.sh (with CUDA where the CUDA toolkit is installed, so that every CUDA
# branch of ours is compiled and linked), every target that uses it built in build-libtorch/, and
# the suite run on the CPU through CTest. The GPU itself is scripts/gpu_check.sh's.
# Usage: scripts/libtorch2.sh [CTEST_ARGUMENTS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$SECONDS
if ! prefix="$("$root/scripts/get_libtorch.sh")"; then
  echo "could not fetch LibTorch 2.x (the reason is above): the suite was not run against it"
  exit 77
fi
echo "libtorch2: LibTorch at $prefix ($((SECONDS - start)) s to fetch or find)"
start=$SECONDS
# Every target that uses LibTorch (the tests build the Python module); the load generator and the
# page check use none.
NMT_LIBTORCH="$prefix" NMT_BUILD_DIR="$root/build-libtorch" "$root/scripts/build.sh" nmt nmt_tests nmt_bench
echo "libtorch2: built in $((SECONDS - start)) s"
ctest --test-dir "$root/build-libtorch" --output-on-failure -j 2 "$@"  # the [slow] cases too
# Without the CUDA toolkit the LibTorch is the CPU-only one, and our CUDA branches went uncompiled.
if ! grep -qx "cuda ON" "$root/build-libtorch/libtorch.txt"; then
  echo "the suite passed against a CPU-only LibTorch 2.x: no CUDA toolkit here, so the CUDA code was not compiled"
  exit 77
fi
