#!/usr/bin/env bash
# Set-up (idempotent) and a Release build in build/. Used by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release > "$root/build.configure.log" 2>&1 ||
  { cat "$root/build.configure.log"; exit 1; }
rm -f "$root/build.configure.log"
# Two jobs: each LibTorch translation unit needs about 1 GB of memory and 20-60 s.
cmake --build "$root/build" -j "${NMT_BUILD_JOBS:-2}"
