#!/usr/bin/env bash
# Set-up (idempotent) and a Release build in build/: every target, or the ones named.
# Usage: scripts/build.sh [TARGET...]    e.g. scripts/build.sh nmt nmt_tests
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release > "$root/build.configure.log" 2>&1 ||
  { cat "$root/build.configure.log"; exit 1; }
rm -f "$root/build.configure.log"
targets=()
for target in "$@"; do targets+=(--target "$target"); done
# Two jobs: each LibTorch translation unit needs about 1 GB of memory.
cmake --build "$root/build" -j "${NMT_BUILD_JOBS:-2}" "${targets[@]}"
