# Sourced by scripts/test.sh and scripts/check_all.sh: runs named checks and ends with a summary
# that names each one and what became of it, so that nothing skipped reads as a pass.
#   run_check NAME COMMAND...   runs COMMAND; exit 0: passed, 77: skipped (the reason is its last
#                               line), anything else: failed
#   skip_check NAME WHY         records a check that was not run
#   print_summary PREFIX        the closing lines: one per check, then "PREFIX: N passed, N failed,
#                               N skipped"; returns non-zero when a check failed
check_names=()
check_results=()
check_failed=0

run_check() {
  local name="$1" status=0 log start
  shift
  log="$(mktemp)"
  start=$SECONDS
  echo "== $name"
  "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  local seconds=$((SECONDS - start))
  check_names+=("$name")
  # A CTest run's closing line ("100% tests passed, 0 tests failed out of N") goes into the summary,
  # the sum of them where the check ran CTest more than once.
  local counted
  counted="$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$log" |
    awk '{ failed += $4; total += $9 } END { if (total) printf "%d%% tests passed, %d tests failed out of %d", int(100 * (total - failed) / total), failed, total }')"
  if [ "$status" -eq 0 ]; then
    check_results+=("passed (${seconds} s)${counted:+: $counted}")
  elif [ "$status" -eq 77 ]; then
    check_results+=("SKIPPED: $(grep -v '^\s*$' "$log" | tail -n 1)")
  else
    check_results+=("FAILED (exit $status, ${seconds} s)${counted:+: $counted}")
    check_failed=1
  fi
  rm -f "$log"
  return "$status"
}

skip_check() {
  check_names+=("$1")
  check_results+=("SKIPPED: $2")
}

print_summary() {
  local prefix="$1" passed=0 failed=0 skipped=0 i
  echo
  for i in "${!check_names[@]}"; do
    printf '%s: %-14s %s\n' "$prefix" "${check_names[$i]}" "${check_results[$i]}"
    case "${check_results[$i]}" in
      passed*) passed=$((passed + 1)) ;;
      FAILED*) failed=$((failed + 1)) ;;
      *) skipped=$((skipped + 1)) ;;
    esac
  done
  echo "$prefix: $passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
}

# export_blas_core NMT: where OpenBLAS picks kernels below this CPU's (src/util/blas_core.h), the
# core type NMT restarts itself with, exported once, so that each of CTest's test processes does
# not restart for it (about half a second of LibTorch's start-up each). Nothing otherwise, or when
# OPENBLAS_CORETYPE is already set.
export_blas_core() {
  [ -z "${OPENBLAS_CORETYPE:-}" ] || return 0
  local core
  core="$(SPDLOG_LEVEL=debug "$1" --help 2>&1 | sed -n 's/.*restarted with OPENBLAS_CORETYPE=\([A-Za-z0-9_]*\).*/\1/p')"
  if [ -n "$core" ]; then
    export OPENBLAS_CORETYPE="$core"
    echo "OpenBLAS picks kernels below this CPU's: OPENBLAS_CORETYPE=$core for the tests"
  fi
}
