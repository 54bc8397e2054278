#!/usr/bin/env bash
# A training study on Multi30k: train every variant of a list with the recipe
# (configs/multi30k_de_en.toml) plus the variant's options, under one wall-clock budget, a few runs
# at a time. scripts/study/report.py then scores them.
#
# Usage: scripts/study/run.sh VARIANTS_FILE...
#   VARIANTS_FILE  lines "NAME  OPTIONS..." (nmt train options, which override the recipe and the
#                  settings below; '#' starts a comment line), e.g. scripts/study/scorers.txt and
#                  scripts/study/tuning.txt
# Environment:
#   STUDY_DIR      where the runs go (default models/study): STUDY_DIR/NAME and STUDY_DIR/NAME.out
#   STUDY_MINUTES  training budget of each run (default 22)
#   STUDY_STEPS    when set, the budget is this many updates instead: other work on the machine then
#                  slows a run down but does not change it, and a run cut short (no "done:" in its
#                  log, a last.ckpt), or finished with fewer updates, goes on from its last
#                  checkpoint with --resume
#   STUDY_JOBS     runs at the same time (default 2)
#   STUDY_THREADS  threads of each run (default 1: two one-thread runs get more from two cores than
#                  one two-thread run, and every run sees the same machine)
# Runs that already finished (NAME/train.log says "done:") are not trained again, but for those that
# STUDY_STEPS resumes (above). The exit status is non-zero when a run failed (its log is
# STUDY_DIR/NAME.out).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
[ $# -ge 1 ] || { echo "usage: scripts/study/run.sh VARIANTS_FILE..." >&2; exit 2; }
study_dir="${STUDY_DIR:-models/study}"
minutes="${STUDY_MINUTES:-22}"
steps="${STUDY_STEPS:-}"
[[ -z $steps || $steps =~ ^[1-9][0-9]*$ ]] || { echo "study: STUDY_STEPS='$steps' must be a whole number of updates" >&2; exit 2; }
jobs="${STUDY_JOBS:-2}"
threads="${STUDY_THREADS:-1}"
[ -x build/nmt ] || { echo "study: build/nmt not found; run scripts/build.sh first" >&2; exit 1; }
[ -s data/multi30k/train.de ] || { echo "study: data/multi30k not found; run scripts/get_multi30k.sh first" >&2; exit 1; }
mkdir -p "$study_dir"
# A private copy of the binary (report.py uses it too): rebuilding during the study changes nothing.
# Copied to a new file and renamed, as an earlier study may still be running the old one.
cp build/nmt "$study_dir/nmt.tmp.$$" && mv -f "$study_dir/nmt.tmp.$$" "$study_dir/nmt"

train_one() {  # NAME OPTIONS...
  local name="$1"; shift
  local dir="$study_dir/$name"
  local budget=(--max-minutes "$minutes") start=--overwrite trained
  if [[ -n $steps ]]; then
    budget=(--max-steps "$steps" --max-minutes 0)
    [[ -s $dir/last.ckpt ]] && start=--resume
  fi
  if grep -q "done:" "$dir/train.log" 2>/dev/null; then
    # A run that stopped at its budget under a smaller STUDY_STEPS goes on to the new one; one that
    # stopped for another reason (early stopping, max-epochs) stays as it is.
    local last reason
    last=$(sed -n 's/.*done: \(.*\) after \([0-9]*\) steps.*/\1|\2/p' "$dir/train.log" | tail -n 1)
    reason=${last%|*} trained=${last##*|}
    if [[ -z $steps || ! $reason =~ ^(max-steps reached|max-minutes reached|interrupted)$ || -z $trained ||
          $trained -ge $steps ]]; then
      echo "study: $name already trained"; return 0
    fi
  fi
  [[ $start == --resume ]] || : >"$dir.out"
  echo "study: $(date +%H:%M:%S) training $name ($start): $*"
  if "$study_dir/nmt" train --config configs/multi30k_de_en.toml --model-dir "$dir" $start \
      "${budget[@]}" --threads "$threads" --keep-checkpoints 5 "$@" >>"$dir.out" 2>&1; then
    echo "study: $(date +%H:%M:%S) $name done"
  else
    echo "study: $name FAILED, see $dir.out" >&2
    return 1
  fi
}
export -f train_one
export study_dir minutes steps threads

variants=$(grep -hv '^[[:space:]]*\(#\|$\)' "$@" || true)
[ -n "$variants" ] || { echo "study: no variants in $*" >&2; exit 2; }
while read -r name _; do
  case "$name" in */*) echo "study: variant name '$name' must not contain '/'" >&2; exit 2 ;; esac
done <<<"$variants"
# One line per run; xargs splits it into words (honouring quotes) and runs `jobs` at a time.
xargs -L 1 -P "$jobs" bash -c 'train_one "$@"' _ <<<"$variants"
