#!/usr/bin/env bash
# The whole test suite: set-up, build, the formatting check (.clang-format), then every Catch2
# test through CTest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
"$root/scripts/format.sh" --check
cd "$root/build"
ctest --output-on-failure -j 2
