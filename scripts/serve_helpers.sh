# Sourced by scripts that need a running nmt serve (scripts/page_test.sh, scripts/nginx_check.sh,
# scripts/bench/serve.sh).
# train_toy_model NMT MODEL_DIR: a small model trained in seconds on data/toy (its log in
# MODEL_DIR.log, whose last lines are printed when it fails).
train_toy_model() {
  local nmt="$1" model="$2" toy
  toy="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/data/toy"
  "$nmt" train --train-source "$toy/train.src" --train-target "$toy/train.tgt" --dev-source "$toy/dev.src" \
    --dev-target "$toy/dev.tgt" --model-dir "$model" --vocab-size 200 --byte-fallback false --embedding-size 16 \
    --encoder-hidden-size 8 --decoder-hidden-size 16 --attention-size 8 --max-steps 20 --validate-every 20 \
    --threads 1 > "$model.log" 2>&1 || { tail -3 "$model.log"; return 1; }
}

# start_server LOG NMT [SERVE OPTIONS...]: starts `NMT serve --port 0 OPTIONS` in the background
# with its output in LOG, waits until it listens, and sets `server` (its pid) and `port`.
start_server() {
  local log="$1" nmt="$2"
  shift 2
  : > "$log"  # there before the server opens it: sed below must not find it missing (set -e)
  "$nmt" serve --port 0 "$@" > "$log" 2>&1 &
  server=$!
  port=""
  for _ in $(seq 600); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log")
    [ -n "$port" ] && return 0
    kill -0 "$server" 2> /dev/null || break
    sleep 0.1
  done
  echo "nmt serve did not start:" >&2
  cat "$log" >&2
  return 1
}
