#!/usr/bin/env bash
# Deployment-grade CPU translation, side by side: the whole test_2016_flickr translated in process
# (nmt_bench translate, after a warm-up of 100 sentences) in float32 with the whole output layer,
# with the lexical shortlist, in int8, and in int8 with the shortlist, alternating, RUNS times each,
# at beam 5 and greedy; the medians and their ratios to float32. Then BLEU of the four on val and
# test_2016_flickr at beam 5 (nmt evaluate), and the whole command (process start and model loading
# included) for float32 and for int8 with the shortlist. Builds MODEL_DIR/shortlist.bin with the
# default sizes when it is not there. Not a test: CI times nothing.
#
# Usage: scripts/bench/cpu_translation.sh [MODEL_DIR] [RUNS]   (default models/multi30k_de_en, 3)
# Environment: NMT_BENCH_THREADS (default: all cores); NMT_SHORTLIST, another shortlist file;
# NMT_BASELINE_BENCH, the nmt_bench of another build (an earlier commit's: git worktree add, then
# scripts/build.sh nmt_bench there), run as a fifth way in float32, and every ratio also given to it.
# Needs a build (scripts/build.sh nmt nmt_bench) and the corpus (scripts/get_multi30k.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
model="${1:-models/multi30k_de_en}"
runs="${2:-3}"
threads="${NMT_BENCH_THREADS:-0}"
shortlist="${NMT_SHORTLIST:-$model/shortlist.bin}"
data=data/multi30k
for tool in nmt nmt_bench; do
  [ -x "build/$tool" ] || { echo "bench: build/$tool not found; run scripts/build.sh nmt nmt_bench" >&2; exit 1; }
done
[ -s "$data/test_2016_flickr.de" ] || { echo "bench: $data not found; run scripts/get_multi30k.sh first" >&2; exit 1; }
[ -f "$model/best.ckpt" ] || { echo "bench: $model/best.ckpt not found: train the recipe first" >&2; exit 1; }
[ -f "$shortlist" ] || build/nmt shortlist --model "$model" --output "$shortlist"

names=(float32 "float32 + shortlist" int8 "int8 + shortlist")
options=("--compute-type float32" "--compute-type float32 --shortlist $shortlist" "--compute-type int8"
  "--compute-type int8 --shortlist $shortlist")
benches=(build/nmt_bench build/nmt_bench build/nmt_bench build/nmt_bench)
baseline="${NMT_BASELINE_BENCH:-}"
if [ -n "$baseline" ]; then
  [ -x "$baseline" ] || { echo "bench: NMT_BASELINE_BENCH=$baseline is not a program" >&2; exit 1; }
  names+=("float32, baseline build")
  options+=("")
  benches+=("$baseline")
fi
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for beam in 5 1; do
  declare -A rates=()
  for run in $(seq "$runs"); do
    line="beam $beam, run $run:"
    for i in "${!names[@]}"; do
      # shellcheck disable=SC2086  # the options are words
      rate=$("${benches[$i]}" translate --model "$model" --input "$data/test_2016_flickr.de" --beam-size "$beam" \
        --threads "$threads" ${options[$i]} | awk -F'|' '{ gsub(/ /, "", $4); print $4 }')
      rates[$i]="${rates[$i]:-} $rate"
      line="$line ${names[$i]} $rate,"
    done
    echo "${line%,} sentences/s"
  done
  base=$(median ${rates[0]})
  old=$([ -n "$baseline" ] && median ${rates[4]} || echo 0)
  for i in "${!names[@]}"; do
    m=$(median ${rates[$i]})
    awk -v b="$beam" -v n="${names[$i]}" -v m="$m" -v base="$base" -v old="$old" \
      'BEGIN { printf "beam %d median, %s: %.1f sentences/s, %.2fx float32", b, n, m, m / base
               if (old > 0) printf ", %.2fx the baseline build", m / old
               print "" }'
  done
  unset rates
done

for split in val test_2016_flickr; do
  for i in 0 1 2 3; do
    # shellcheck disable=SC2086
    bleu=$(build/nmt evaluate --model "$model" --src "$data/$split.de" --ref "$data/$split.en" --beam-size 5 \
      --quiet --json ${options[$i]} | python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["bleu"])')
    echo "$split, beam 5, ${names[$i]}: BLEU $bleu"
  done
done

seconds() {  # the wall time of a command, in seconds
  local start=$EPOCHREALTIME
  "$@" > /dev/null
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}
echo "process start (build/nmt --help): $(seconds build/nmt --help) s"
for beam in 5 1; do
  for i in 0 3; do
    # shellcheck disable=SC2086
    echo "whole command, beam $beam, ${names[$i]}: $(seconds build/nmt translate --model "$model" \
      --input "$data/test_2016_flickr.de" --beam-size "$beam" --threads "$threads" --quiet ${options[$i]}) s"
  done
done
echo "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
  "VNNI $(grep -q avx512_vnni /proc/cpuinfo && echo yes || echo no), commit $(git rev-parse --short HEAD))"
