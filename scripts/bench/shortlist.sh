#!/usr/bin/env bash
# What a lexical shortlist (nmt shortlist, translate --shortlist) buys and costs: the whole
# test_2016_flickr translated in process (nmt_bench translate, after a warm-up of 100 sentences)
# with the whole output layer and with the shortlist, alternating, RUNS times each, at beam 5 and
# greedy; then BLEU of both on val and test_2016_flickr at beam 5 (nmt evaluate). Builds
# MODEL_DIR/shortlist.bin with the default sizes when it is not there. Not a test: CI times nothing.
#
# Usage: scripts/bench/shortlist.sh [MODEL_DIR] [RUNS]   (default models/multi30k_de_en, 3 runs)
# Environment: NMT_BENCH_THREADS (default: all cores); NMT_SHORTLIST, another shortlist file.
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

rate() {  # beam, then extra options
  local beam="$1"
  shift
  build/nmt_bench translate --model "$model" --input "$data/test_2016_flickr.de" --beam-size "$beam" \
    --threads "$threads" "$@" | awk -F'|' '{ gsub(/ /, "", $4); print $4 }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for beam in 5 1; do
  full=() listed=()
  for run in $(seq "$runs"); do
    full+=("$(rate "$beam")")
    listed+=("$(rate "$beam" --shortlist "$shortlist")")
    echo "beam $beam, run $run: whole output layer ${full[-1]} sentences/s, shortlist ${listed[-1]}"
  done
  f=$(median "${full[@]}") l=$(median "${listed[@]}")
  awk -v b="$beam" -v f="$f" -v l="$l" \
    'BEGIN { printf "beam %d median: whole %.1f, shortlist %.1f sentences/s: %.2fx\n", b, f, l, l / f }'
done

for split in val test_2016_flickr; do
  for with in none "$shortlist"; do
    extra=()
    [ "$with" = none ] || extra=(--shortlist "$with")
    bleu=$(build/nmt evaluate --model "$model" --src "$data/$split.de" --ref "$data/$split.en" --beam-size 5 \
      --quiet --json "${extra[@]}" | python3 -c 'import json, sys; print(f"{json.load(sys.stdin)[\"bleu\"]:.2f}")')
    echo "$split, beam 5, shortlist $with: BLEU $bleu"
  done
done
echo "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, commit $(git rev-parse --short HEAD))"
