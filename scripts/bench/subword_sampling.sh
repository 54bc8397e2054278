#!/usr/bin/env bash
# What subword regularisation costs a training run: the Multi30k recipe's settings (BPE: so
# BPE-dropout) trained for STEPS updates, alternately without sampling and with --subword-alpha
# ALPHA, ROUNDS times each, every run from the same prepared corpus (nmt prepare, once). Each
# epoch's segmentations are drawn on their own thread while the epoch before trains; the first
# epoch's before training starts. Prints each run's training seconds (metrics.jsonl's last
# elapsed_seconds, the first draw included) and, of the sampled runs, the seconds the run itself
# logged drawing and waiting for segmentations ("segmentations drawn anew ... in S s ..., W s
# waited for"), then a Markdown row of the medians.
#
# Usage: scripts/bench/subword_sampling.sh [STEPS [ALPHA [ROUNDS]]]   (default 1000 0.1 2)
# Environment: NMT_BENCH_CONFIG (default configs/multi30k_de_en.toml), NMT_BENCH_THREADS (default:
# all cores).
# Needs scripts/build.sh nmt and the corpus (scripts/get_multi30k.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
steps="${1:-1000}"
alpha="${2:-0.1}"
rounds="${3:-2}"
config="${NMT_BENCH_CONFIG:-configs/multi30k_de_en.toml}"
threads="${NMT_BENCH_THREADS:-0}"
for value in "$steps" "$rounds"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench: $value is not a positive number" >&2; exit 1; }
done
[[ "$alpha" =~ ^(0?[.][0-9]*[1-9][0-9]*|1)$ ]] || { echo "bench: ALPHA must be in (0, 1], not '$alpha'" >&2; exit 1; }
source scripts/lib/recipe_bench.sh

# run NAME ALPHA: one training run; prints its training seconds, the seconds its draws took on
# their own thread and the seconds it waited for them (0 0 without).
run() {
  local dir="$work/$1"
  rm -rf "$dir"
  build/nmt train --config "$config" --corpus-dir "$work/corpus" --model-dir "$dir" --max-steps "$steps" \
    --validate-every "$steps" --threads "$threads" --tensorboard no --subword-alpha "$2" > "$work/train.log" 2>&1 ||
    { tail -5 "$work/train.log" >&2; exit 1; }
  python3 - "$dir/metrics.jsonl" "$work/train.log" << 'PY'
import json, re, sys
elapsed = json.loads(open(sys.argv[1]).readlines()[-1])["elapsed_seconds"]
drawn = waited = 0.0
for line in open(sys.argv[2]):
    found = re.search(r"segmentations drawn anew .* in ([0-9.]+) s on their own thread(?:, ([0-9.]+) s waited for)?", line)
    if found:
        drawn += float(found.group(1))
        waited += float(found.group(2) or 0)
print(elapsed, drawn, waited)
PY
}

without=()
with=()
drawn=()
waited=()
for round in $(seq "$rounds"); do
  read -r seconds _ _ <<< "$(run without 0)"
  without+=("$seconds")
  read -r seconds draws waits <<< "$(run with "$alpha")"
  with+=("$seconds")
  drawn+=("$draws")
  waited+=("$waits")
  echo "round $round: without ${without[-1]} s; with subword-alpha $alpha ${with[-1]} s (draws $draws s, waited $waits s)"
done
python3 - "${without[*]}" "${with[*]}" "${drawn[*]}" "${waited[*]}" "$steps" "$alpha" << 'EOF'
import statistics, sys
without, with_sampling, drawn, waited = ([float(x) for x in argument.split()] for argument in sys.argv[1:5])
a, b = statistics.median(without), statistics.median(with_sampling)
d, w = statistics.median(drawn), statistics.median(waited)
print()
print("| updates | subword-alpha | without (s) | with (s) | with / without | draws on their thread (s) | waited for (s) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
print(f"| {sys.argv[5]} | {sys.argv[6]} | {a:.2f} | {b:.2f} | {b / a:.3f} | {d:.2f} | {w:.2f} |")
EOF
