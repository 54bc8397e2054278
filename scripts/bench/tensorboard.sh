#!/usr/bin/env bash
# What writing TensorBoard events costs a training run: the Multi30k recipe's settings, trained for
# STEPS updates with a validation every VALIDATE_EVERY, alternately with --tensorboard no and with
# the default event directory, ROUNDS times each. Every run starts from the same prepared corpus
# (nmt prepare, once), so the runs differ in the events alone. Prints each run's training seconds
# (metrics.jsonl's last elapsed_seconds: updates and validations, after set-up) and, of the runs
# with events, the time the run itself measured writing them and translating their samples (its
# last "TensorBoard: N events in S s" line), then a Markdown row of the medians. The runs' own
# spread is wider than the events' share, which the measured seconds give directly.
#
# Usage: scripts/bench/tensorboard.sh [STEPS [VALIDATE_EVERY [ROUNDS]]]   (default 300 100 3)
# Environment: NMT_BENCH_CONFIG (default configs/multi30k_de_en.toml), NMT_BENCH_THREADS (default:
# all cores).
# Needs scripts/build.sh nmt and the corpus (scripts/get_multi30k.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
steps="${1:-300}"
validate_every="${2:-100}"
rounds="${3:-3}"
config="${NMT_BENCH_CONFIG:-configs/multi30k_de_en.toml}"
threads="${NMT_BENCH_THREADS:-0}"
for value in "$steps" "$validate_every" "$rounds"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench: $value is not a positive number" >&2; exit 1; }
done
source scripts/lib/recipe_bench.sh

# run NAME TENSORBOARD: one training run; prints its training seconds, and the seconds it spent on
# events (0 without).
run() {
  local dir="$work/$1"
  rm -rf "$dir"
  build/nmt train --config "$config" --corpus-dir "$work/corpus" --model-dir "$dir" --max-steps "$steps" \
    --validate-every "$validate_every" --threads "$threads" --tensorboard "$2" > "$work/train.log" 2>&1 ||
    { tail -5 "$work/train.log" >&2; exit 1; }
  local events
  events="$(sed -n 's/.*TensorBoard: [0-9]* events in \([0-9.]*\) s.*/\1/p' "$work/train.log" | tail -1)"
  python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["elapsed_seconds"], sys.argv[2])' \
    "$dir/metrics.jsonl" "${events:-0}"
}

without=()
with=()
spent=()
for round in $(seq "$rounds"); do
  read -r seconds _ <<< "$(run without no)"
  without+=("$seconds")
  read -r seconds events <<< "$(run with "")"
  with+=("$seconds")
  spent+=("$events")
  echo "round $round: without events ${without[-1]} s; with events ${with[-1]} s, of which events $events s"
done
python3 - "${without[*]}" "${with[*]}" "${spent[*]}" "$steps" "$validate_every" << 'EOF'
import statistics, sys
without, with_events, spent = ([float(x) for x in argument.split()] for argument in sys.argv[1:4])
a, b, c = statistics.median(without), statistics.median(with_events), statistics.median(spent)
share = statistics.median(s / w for s, w in zip(spent, with_events))
print()
print("| updates | validations | without events (s) | with events (s) | with / without | on events (s) | share |")
print("| --- | --- | --- | --- | --- | --- | --- |")
steps, every = int(sys.argv[4]), int(sys.argv[5])
print(f"| {steps} | {steps // every} | {a:.2f} | {b:.2f} | {b / a:.3f} | {c:.3f} | {100 * share:.2f}% |")
EOF
