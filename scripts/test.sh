#!/usr/bin/env bash
# The whole test suite: set-up, build, the formatting check (.clang-format), every Catch2 test
# through CTest, then the checks that need more than the main build: a real full disk
# (scripts/faults/disk_full.sh, root only), nmt serve's page in headless chromium
# (scripts/page_test.sh), the suite under AddressSanitizer and
# UndefinedBehaviorSanitizer (scripts/sanitize.sh) and the fuzz targets (scripts/fuzz.sh,
# NMT_FUZZ_SECONDS each, default 30).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
"$root/scripts/format.sh" --check
(cd "$root/build" && ctest --output-on-failure -j 2)
"$root/scripts/faults/disk_full.sh" "$root/build/nmt"
"$root/scripts/page_test.sh"
"$root/scripts/sanitize.sh"
"$root/scripts/fuzz.sh" "${NMT_FUZZ_SECONDS:-30}"
