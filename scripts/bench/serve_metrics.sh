#!/usr/bin/env bash
# What GET /metrics costs nmt serve under load: CLIENTS concurrent clients send single sentences of
# test_2016_flickr (greedy, build/nmt_load) for REQUESTS answers, in turn with nothing else, with a
# scraper asking for /metrics ten times a second (Prometheus' default asks every 15 s), and with
# the same scraper asking for /health instead, ROUNDS times each, on one server. The scraper keeps
# one connection (Python's http.client), so that its own cost is small and the same for both
# paths: /metrics against /health is what the metrics themselves cost. Prints nmt_load's row of
# each run, then a Markdown row of the median sentences/s and their ratios.
#
# Usage: scripts/bench/serve_metrics.sh [MODEL_DIR [CLIENTS [REQUESTS [ROUNDS]]]]
#        (default models/multi30k_de_en 16 3000 5)
# Needs scripts/build.sh nmt nmt_load, the corpus (scripts/get_multi30k.sh) and a trained model.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
model="${1:-models/multi30k_de_en}"
clients="${2:-16}"
requests="${3:-3000}"
rounds="${4:-5}"
test_source=data/multi30k/test_2016_flickr.de
for tool in build/nmt build/nmt_load; do
  [ -x "$tool" ] || { echo "bench: $tool not found; run scripts/build.sh nmt nmt_load" >&2; exit 1; }
done
[ -s "$test_source" ] || { echo "bench: $test_source not found; run scripts/get_multi30k.sh first" >&2; exit 1; }
[ -f "$model/best.ckpt" ] || { echo "bench: $model/best.ckpt not found; train a model first" >&2; exit 1; }

log="$(mktemp)"
scrapes="$(mktemp)"
server=""
scraper=""
trap '[ -n "$scraper" ] && kill "$scraper" 2> /dev/null; [ -n "$server" ] && kill "$server" 2> /dev/null; rm -f "$log" "$scrapes"' EXIT
source scripts/serve_helpers.sh
start_server "$log" build/nmt --model "$model" --beam-size 1

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "| run | clients | requests | errors | sentences/s | p50 ms | p90 ms | p99 ms | max ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
build/nmt_load --port "$port" --input "$test_source" --clients 1 --requests 50 > /dev/null  # warm-up
load() {
  build/nmt_load --port "$port" --input "$test_source" --clients "$clients" --requests "$requests" --seconds 60
}

# The scraper: GET PATH every 0.1 s on one kept-alive connection (a new one when the server closes
# it) until killed; each answer's status a line.
scraper_code='
import http.client, sys, time
port, path = int(sys.argv[1]), sys.argv[2]
connection = None
while True:
    try:
        connection = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        print(answer.status, flush=True)
    except (OSError, http.client.HTTPException):
        connection = None
    time.sleep(0.1)
'

# measure NAME [PATH]: one load, with PATH scraped meanwhile; prints its row and adds its rate to
# rates[NAME].
declare -A rates
measure() {
  local name="$1" path="${2:-}" row
  if [ -n "$path" ]; then
    python3 -c "$scraper_code" "$port" "$path" >> "$scrapes" &
    scraper=$!
  fi
  row="$(load)"
  if [ -n "$path" ]; then
    kill "$scraper"
    wait "$scraper" 2> /dev/null || true
    scraper=""
  fi
  echo "| $name |${row#|}"
  rates[$name]+="$(echo "$row" | awk -F '|' '{ print $5 }') "
}
for _ in $(seq "$rounds"); do
  measure without
  measure /metrics /metrics
  measure /health /health
done
kill -TERM "$server"
wait "$server"
server=""
answered="$(grep -c '^200$' "$scrapes" || true)"
python3 - "${rates[without]}" "${rates[/metrics]}" "${rates[/health]}" "$answered" "$(wc -l < "$scrapes")" << 'EOF'
import statistics, sys
a, m, h = (statistics.median(float(x) for x in argument.split()) for argument in sys.argv[1:4])
print()
print("| without (sentences/s) | /metrics 10 times a second | /health 10 times a second | /metrics / without "
      "| /metrics / /health | scrapes answered |")
print("| --- | --- | --- | --- | --- | --- |")
print(f"| {a:.1f} | {m:.1f} | {h:.1f} | {m / a:.3f} | {m / h:.3f} | {sys.argv[4]} of {sys.argv[5]} |")
EOF
