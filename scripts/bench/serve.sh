#!/usr/bin/env bash
# The serving benchmark: nmt serve on loopback under 1, 4, 16 and 64 concurrent clients, each
# sending single sentences of test_2016_flickr (greedy) and waiting for each answer before the
# next (build/nmt_load). Prints `nmt translate`'s batch rate on the same file first, then one
# Markdown row per client count. Bounded: each row stops after REQUESTS answers or 60 s.
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
# shellcheck disable=SC2086  # the options are words
build/nmt_bench translate --model "$model" --input "$test_source" --beam-size 1 ${NMT_MODEL_OPTIONS:-}

log="$(mktemp)"
server=""
trap '[ -n "$server" ] && kill "$server" 2> /dev/null; rm -f "$log"' EXIT
source scripts/serve_helpers.sh
# shellcheck disable=SC2086
start_server "$log" build/nmt --model "$model" --beam-size 1 ${NMT_MODEL_OPTIONS:-} ${NMT_SERVE_OPTIONS:-}

echo
echo "nmt serve ${NMT_MODEL_OPTIONS:-} ${NMT_SERVE_OPTIONS:-}: single-sentence requests, greedy"
echo "| clients | requests | errors | sentences/s | p50 ms | p90 ms | p99 ms | max ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
build/nmt_load --port "$port" --input "$test_source" --clients 1 --requests 50 > /dev/null  # warm-up
for clients in 1 4 16 64; do
  build/nmt_load --port "$port" --input "$test_source" --clients "$clients" --requests "$requests" --seconds 60
done
kill -TERM "$server"
wait "$server"
server=""
grep -E "stopped" "$log" | sed 's/^.*\] //'
