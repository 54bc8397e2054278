#!/usr/bin/env bash
# The serving benchmark: nmt serve on loopback under 1, 4, 16 and 64 concurrent clients, each
# sending single sentences of test_2016_flickr (greedy) and waiting for each answer before the
# next (build/nmt_load). Prints the batch rate of nmt_bench translate on the same file first, then one
# Markdown row per client count, then the batch rate again and each row's share of the two batch
# rates' mean (the machine's speed drifts between runs). Bounded: each row stops after REQUESTS
# answers or 60 s.
#
# Usage: scripts/bench/serve.sh [MODEL_DIR] [REQUESTS]   (default models/multi30k_de_en, 1000)
# Environment: NMT_SERVE_OPTIONS, extra options for nmt serve (e.g. "--max-wait-ms 5");
# NMT_MODEL_OPTIONS, options for both the batch rate and the server (e.g. "--compute-type int8
# --shortlist models/multi30k_de_en/shortlist.bin").
# Needs a build (scripts/build.sh), the corpus (scripts/get_multi30k.sh) and a trained model.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
model="${1:-models/multi30k_de_en}"
requests="${2:-1000}"
test_source=data/multi30k/test_2016_flickr.de
[ -x build/nmt_load ] || { echo "bench: build/nmt_load not found; run scripts/build.sh first" >&2; exit 1; }
[ -s "$test_source" ] || { echo "bench: $test_source not found; run scripts/get_multi30k.sh first" >&2; exit 1; }
[ -f "$model/best.ckpt" ] || { echo "bench: $model/best.ckpt not found; train a model first" >&2; exit 1; }

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
echo "nmt translate, the whole file in batches (greedy, after warm-up):"
echo "| what | setting | sentences/s | target tokens/s | FLOP per target token | GFLOP/s | % of mm | peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
# The batch rate (sentences/s) of the same model on the same file, as a Markdown row.
batch_rate() {
  # shellcheck disable=SC2086  # the options are words
  build/nmt_bench translate --model "$model" --input "$test_source" --beam-size 1 ${NMT_MODEL_OPTIONS:-}
}
log="$(mktemp)"
rows="$(mktemp)"  # the Markdown rows with a rate: the batch rates, then the clients'
server=""
trap '[ -n "$server" ] && kill "$server" 2> /dev/null; rm -f "$log" "$rows"' EXIT
batch_rate | tee "$rows"

source scripts/serve_helpers.sh
# shellcheck disable=SC2086
start_server "$log" build/nmt --model "$model" --beam-size 1 ${NMT_MODEL_OPTIONS:-} ${NMT_SERVE_OPTIONS:-}

echo
echo "nmt serve ${NMT_MODEL_OPTIONS:-} ${NMT_SERVE_OPTIONS:-}: single-sentence requests, greedy"
echo "| clients | requests | errors | sentences/s | p50 ms | p90 ms | p99 ms | max ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
build/nmt_load --port "$port" --input "$test_source" --clients 1 --requests 50 > /dev/null  # warm-up
for clients in 1 4 16 64; do
  build/nmt_load --port "$port" --input "$test_source" --clients "$clients" --requests "$requests" --seconds 60 |
    tee -a "$rows"
done
kill -TERM "$server"
wait "$server"
server=""
grep -E "stopped" "$log" | sed 's/^.*\] //'

echo
echo "the batch rate again:"
batch_rate | tee -a "$rows"
# Each client count's sentences/s against the mean of the batch rates before and after.
awk -F '|' '$2 ~ /translation/ { batch += $4; runs++ } $2 ~ /^ *[0-9]+ *$/ { clients[++n] = $2; rate[n] = $5 }
  END { mean = batch / runs
        printf "batch rate %.1f sentences/s (the mean of %d runs);", mean, runs
        for (i = 1; i <= n; i++) printf " %d clients %.1f%%;", clients[i], 100 * rate[i] / mean
        print "" }' "$rows"
