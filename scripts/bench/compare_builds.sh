#!/usr/bin/env bash
# Two builds side by side on the CPU: training, greedy and beam-5 translation of the Multi30k
# recipe measured with each build's nmt_bench in turn, ROUNDS times, and the medians with their
# ratio (this build over the other). For a change that should cost nothing: the rates of both
# builds come from the same minutes, so the machine's drift falls on both alike.
#
# Usage: scripts/bench/compare_builds.sh OTHER_NMT_BENCH [MODEL_DIR] [ROUNDS]
#   OTHER_NMT_BENCH  the nmt_bench of the other build (an earlier commit's: git worktree add,
#                    then scripts/build.sh nmt_bench there)
#   MODEL_DIR        a trained model for the translation rows (default models/multi30k_de_en)
#   ROUNDS           default 5
# Environment: NMT_BENCH_STEPS (timed training steps, default 100), NMT_BENCH_THREADS (default:
# all cores), NMT_COMPARE_ROWS (which rows: 0 training, 1 greedy, 2 beam 5; default "0 1 2").
# Needs this build's nmt_bench (scripts/build.sh nmt_bench) and the corpus (scripts/get_multi30k.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
other="${1:?usage: scripts/bench/compare_builds.sh OTHER_NMT_BENCH [MODEL_DIR] [ROUNDS]}"
model="${2:-models/multi30k_de_en}"
rounds="${3:-5}"
steps="${NMT_BENCH_STEPS:-100}"
threads="${NMT_BENCH_THREADS:-0}"
read -ra rows <<< "${NMT_COMPARE_ROWS:-0 1 2}"
this=build/nmt_bench
test_source=data/multi30k/test_2016_flickr.de
for bench in "$this" "$other"; do
  [ -x "$bench" ] || { echo "bench: $bench is not a program; run scripts/build.sh nmt_bench" >&2; exit 1; }
done
[ -s "$test_source" ] || { echo "bench: $test_source not found; run scripts/get_multi30k.sh first" >&2; exit 1; }
[ -f "$model/best.ckpt" ] || { echo "bench: $model/best.ckpt not found: train the recipe first" >&2; exit 1; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: ROUNDS=$rounds is not a positive number" >&2; exit 1; }

names=("training" "greedy, batch 64" "beam 5, batch 64")
# A row's target tokens/s (column 5 of nmt_bench's Markdown row).
rate() { awk -F'|' 'NR == 1 { gsub(/ /, "", $5); print $5 }'; }
measure() {  # BENCH WHAT
  case "$2" in
    0) "$1" --config configs/multi30k_de_en.toml train --threads "$threads" --bench-steps "$steps" ;;
    1) "$1" translate --model "$model" --input "$test_source" --beam-size 1 --batch-size 64 --threads "$threads" ;;
    2) "$1" translate --model "$model" --input "$test_source" --beam-size 5 --batch-size 64 --threads "$threads" ;;
  esac | rate
}
declare -A rates
for ((round = 1; round <= rounds; ++round)); do
  for what in "${rows[@]}"; do
    # Alternating which build goes first, so that neither always runs on a machine just warmed.
    if ((round % 2)); then order=(this other); else order=(other this); fi
    for side in "${order[@]}"; do
      bench=$([ "$side" = this ] && echo "$this" || echo "$other")
      rates[$side,$what]+="$(measure "$bench" "$what") "
    done
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| target tokens/s, median of $rounds | this build | other build | this / other |"
echo "| --- | ---: | ---: | ---: |"
for what in "${rows[@]}"; do
  a=$(echo "${rates[this,$what]}" | median)
  b=$(echo "${rates[other,$what]}" | median)
  echo "| ${names[$what]} | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }') |"
done
echo
for what in "${rows[@]}"; do echo "${names[$what]}: this ${rates[this,$what]}; other ${rates[other,$what]}"; done
