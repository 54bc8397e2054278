# Sourced by scripts that need a running nmt serve (scripts/page_test.sh, scripts/bench/serve.sh).
# start_server LOG NMT [SERVE OPTIONS...]: starts `NMT serve --port 0 OPTIONS` in the background
# with its output in LOG, waits until it listens, and sets `server` (its pid) and `port`.
start_server() {
  local log="$1" nmt="$2"
  shift 2
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
