#!/usr/bin/env bash
# The deep checks, beside scripts/test.sh's fast suite: the Catch2 cases tagged [slow] (kill loops,
# distributed kill and stop cases, anything over 10 s), on a CPU with AVX-512 the fast cases that
# test the kernels' work again with those of a CPU without it (NMT_KERNELS=avx2: int8's 6-bit
# activations), a real full disk (scripts/faults/disk_full.sh, root only), nmt serve's page in
# headless chromium (scripts/page_test.sh), nmt serve behind nginx with TLS (scripts/nginx_check.sh), the Python module installed with pip into a fresh
# virtual environment and tested there (scripts/python_package.sh), the Multi30k pipelines at tiny
# budgets (scripts/recipe_check.sh), the suite under
# AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh, its own build), the fuzz
# targets (scripts/fuzz.sh, clang, its own build, NMT_FUZZ_SECONDS each, default 30) and the whole
# suite against LibTorch 2.x with CUDA, on the CPU (scripts/libtorch2.sh, its own build). Each part
# runs whatever the others did; the last lines say of each whether it passed, failed or was skipped
# and why.
# Usage: scripts/check_all.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/checks.sh"

# The fast cases again with an AVX2-only CPU's kernels: every case of the model, search, training
# and kernels, and of the commands (cli, serve) those that name int8, a shortlist or the kernel
# switch. What the cases of faults, ranks, processes and documents check does not depend on them.
avx2_kernels() {
  local ctest=(env NMT_KERNELS=avx2 ctest --test-dir "$root/build" -LE slow --output-on-failure -j 2)
  "${ctest[@]}" -E '^(cli|serve|faults|distributed|rendezvous store|docs|configs|python)' &&
    "${ctest[@]}" -R '^(cli|serve): .*(int8|shortlist|NMT_KERNELS)'
}

if run_check build env -u NMT_LIBTORCH -u NMT_BUILD_DIR "$root/scripts/build.sh" nmt nmt_tests nmt_page_check; then
  export_blas_core "$root/build/nmt"
  run_check slow-cases ctest --test-dir "$root/build" -L slow --output-on-failure -j 2
  if grep -qw avx512f /proc/cpuinfo; then
    run_check avx2-kernels avx2_kernels
  else
    skip_check avx2-kernels "no AVX-512 on this CPU: the fast suite already ran its AVX2 kernels"
  fi
  run_check disk-full "$root/scripts/faults/disk_full.sh" "$root/build/nmt"
  run_check page "$root/scripts/page_test.sh"
  run_check nginx "$root/scripts/nginx_check.sh"
  run_check python-package "$root/scripts/python_package.sh"
  run_check recipes "$root/scripts/recipe_check.sh"
else
  for name in slow-cases avx2-kernels disk-full page nginx python-package recipes; do skip_check "$name" "not run: the build failed"; done
fi
run_check sanitizers "$root/scripts/sanitize.sh"
run_check fuzz "$root/scripts/fuzz.sh" "${NMT_FUZZ_SECONDS:-30}"
run_check libtorch2 "$root/scripts/libtorch2.sh"
print_summary check_all
