#!/usr/bin/env bash
# The hostile-client benchmark of nmt serve on loopback (docs/serving.md, "Limits"):
#   1. the targets under attack: 500 stalled heads, 500 trickling bodies, 200 endless chunked
#      bodies, 200 gzip bombs, 100 floods of header fields, 64 announced bodies that never come,
#      200 pipelines whose answers are never read, 2 senders of 1 MB JSON bodies and 200 refusals
#      left unread, held open for 30 s (scripts/bench/hostile_clients.py), while a real client
#      sends a sentence and a GET /health every 200 ms: their latency against 100 ms, and the
#      server's resident memory growth against 256 MiB; and what two refusals echo or allow;
#      then each attack alone on a fresh server, one row each (NMT_HOSTILE_KIND_SECONDS, 8 s);
#   2. well-behaved throughput: 64 clients with single sentences (build/nmt_load), with
#      NMT_BASELINE_BINARY (another build's nmt) alternating with this build's, 3 runs each.
# Usage: scripts/bench/hostile.sh [MODEL_DIR]   (default models/demo: scripts/demo.sh trains it)
# Environment: NMT_BASELINE_BINARY (an nmt to compare throughput with, and to attack alone as well),
#   NMT_HOSTILE_SECONDS (30), NMT_HOSTILE_KIND_SECONDS (8).
# Needs a build (scripts/build.sh) and python3.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
model="${1:-models/demo}"
input=data/toy/test.src
[ -x build/nmt ] && [ -x build/nmt_load ] || { echo "bench: build/nmt or build/nmt_load not found; run scripts/build.sh" >&2; exit 1; }
[ -f "$model/best.ckpt" ] || { echo "bench: $model/best.ckpt not found; run scripts/demo.sh or name a model" >&2; exit 1; }
# 2,000 connections for the clients, as many for the server: above the usual soft limit of 1,024.
ulimit -n "$(ulimit -Hn)"

source scripts/serve_helpers.sh
log="$(mktemp)"
server=""
trap '[ -n "$server" ] && kill "$server" 2> /dev/null; rm -f "$log"' EXIT
stop_server() {
  kill -TERM "$server"
  wait "$server" || true
  server=""
}

builds=(build/nmt)
[ -n "${NMT_BASELINE_BINARY:-}" ] && builds+=("$NMT_BASELINE_BINARY")
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; model $model"
echo
start_server "$log" build/nmt --model "$model" --beam-size 1
echo "nmt serve (defaults) under attack for ${NMT_HOSTILE_SECONDS:-30} s:"
echo "| what | value | target |"
echo "| --- | --- | --- |"
python3 scripts/bench/hostile_clients.py --port "$port" --pid "$server" --seconds "${NMT_HOSTILE_SECONDS:-30}" \
  --sentence "$(head -1 "$input")"
stop_server
grep -E "stopped" "$log" | sed 's/^.*\] //'

echo
echo "Each attack alone for ${NMT_HOSTILE_KIND_SECONDS:-8} s, a fresh server each (targets: all answered, p99 < 100 ms, growth < 256 MiB):"
echo "| build | attack (connections) | real requests answered, failed | POST /translate p99 ms | GET /health p99 ms | RSS growth MiB |"
echo "| --- | --- | --- | --- | --- | --- |"
for kind in stalled trickling chunked gzip headers announcing unread big_json lingering; do
  for binary in "${builds[@]}"; do
    start_server "$log" "$binary" --model "$model" --beam-size 1
    python3 scripts/bench/hostile_clients.py --port "$port" --pid "$server" --seconds "${NMT_HOSTILE_KIND_SECONDS:-8}" \
      --sentence "$(head -1 "$input")" --only "$kind" | sed "s#^#| $binary #"
    stop_server
  done
done

echo
echo "64 well-behaved clients, single sentences, greedy, alternating builds:"
echo "| build | clients | requests | errors | sentences/s | p50 ms | p90 ms | p99 ms | max ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for round in 1 2 3; do
  for binary in "${builds[@]}"; do
    start_server "$log" "$binary" --model "$model" --beam-size 1
    build/nmt_load --port "$port" --input "$input" --clients 4 --requests 100 > /dev/null  # warm-up
    build/nmt_load --port "$port" --input "$input" --clients 64 --requests 3000 --seconds 30 | sed "s#^#| $binary #"
    stop_server
  done
done
