#!/usr/bin/env bash
# The benchmark: training and translation speed of the Multi30k recipe on this machine, and how
# close they come to the machine's own matrix-multiply rate. Prints one Markdown table.
#
# Usage: scripts/bench/run.sh [MODEL_DIR] [CONFIG]
#   MODEL_DIR  a trained model for the translation rows (default models/multi30k_de_en; the rows
#              are skipped when it has no best.ckpt)
#   CONFIG     the training settings (default configs/multi30k_de_en.toml)
# Environment: NMT_BENCH_BINARY (the nmt_bench to measure, default build/nmt_bench),
# NMT_BENCH_STEPS (timed training steps, default 100), NMT_BENCH_THREADS (default: all cores), NMT_BENCH_ROUNDS (default 1): measure the matrix-multiply rate and training that many
# times, alternating, and report the median of each (the table's "% of mm" is the one median over
# the other; every round's rates follow the table). Needs a build (scripts/build.sh) and the corpus
# (scripts/get_multi30k.sh).
#
# Each row runs in its own process, so its peak resident memory is its own. FLOP counts come from
# the model's shapes (src/bench/flops.h): matrix products only, training = 3 x forward, beam K =
# K decoder rows per output token. "% of mm" divides the achieved rate by the first row's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bench="${NMT_BENCH_BINARY:-build/nmt_bench}"
model="${1:-models/multi30k_de_en}"
config="${2:-configs/multi30k_de_en.toml}"
steps="${NMT_BENCH_STEPS:-100}"
threads="${NMT_BENCH_THREADS:-0}"
rounds="${NMT_BENCH_ROUNDS:-1}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench: NMT_BENCH_ROUNDS=$rounds is not a positive number" >&2; exit 1; }
test_source=data/multi30k/test_2016_flickr.de

[ -x "$bench" ] || { echo "bench: $bench not found; run scripts/build.sh first" >&2; exit 1; }
[ -s "$test_source" ] || { echo "bench: $test_source not found; run scripts/get_multi30k.sh first" >&2; exit 1; }

echo "| what | setting | sentences/s | target tokens/s | FLOP per target token | GFLOP/s | % of mm | peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
# A machine's rates drift by 10-30% within minutes, the matrix multiply's too: with several rounds,
# the two are measured in turn and the medians compared.
gflops() { awk -F'|' '{ gsub(/ /, "", $7); print $7 }'; }
median_row() { sort -t'|' -k7,7g | awk '{ rows[NR] = $0 } END { print rows[int((NR + 1) / 2)] }'; }
mm_rows=() train_rows=()
for ((round = 1; round <= rounds; ++round)); do
  mm_rows+=("$("$bench" mm --threads "$threads")")
  train_rows+=("$("$bench" --config "$config" train --threads "$threads" --bench-steps "$steps")")
done
mm_row=$(printf '%s\n' "${mm_rows[@]}" | median_row)
echo "$mm_row"
mm_gflops=$(echo "$mm_row" | gflops)
# The products inside the recurrent loops are small: a batch of about 60 rows times the 256 -> 768
# gate matrix. Their own rate bounds what the training loop can reach.
"$bench" mm --shape 60,256,768 --threads "$threads" --mm-gflops "$mm_gflops"
printf '%s\n' "${train_rows[@]}" | median_row |
  awk -F'|' -v mm="$mm_gflops" 'BEGIN { OFS = "|" } { rate = $7; gsub(/ /, "", rate); $8 = sprintf(" %.1f %% ", 100 * rate / mm); print }'

if [ -f "$model/best.ckpt" ]; then
  for beam in 1 5; do
    for batch in 16 64 128; do
      "$bench" translate --model "$model" --input "$test_source" --beam-size "$beam" --batch-size "$batch" \
        --threads "$threads" --mm-gflops "$mm_gflops"
    done
  done
else
  echo "bench: $model/best.ckpt not found: translation rows skipped (train the recipe first)" >&2
fi
if ((rounds > 1)); then
  echo
  echo "$rounds rounds, in turn: matrix multiply $(printf '%s\n' "${mm_rows[@]}" | gflops | paste -sd' ') GFLOP/s;" \
    "training $(printf '%s\n' "${train_rows[@]}" | gflops | paste -sd' ') GFLOP/s."
fi
