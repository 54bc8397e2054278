#!/usr/bin/env bash
# The page of nmt serve in a real browser: trains a small model on the toy corpus (or takes
# MODEL_DIR), starts nmt serve on a free port, and runs build/nmt_page_check, which drives Debian's
# chromium headless through chromedriver: types a sentence, waits for the translation and the
# heatmap, and checks them against the server's own answer. Skipped, saying so, with exit status 77
# when chromium or chromedriver is missing (scripts/setup.sh installs them as root).
# Usage: scripts/page_test.sh [MODEL_DIR [SENTENCE [SCREENSHOT.png]]]
# Needs scripts/build.sh nmt nmt_page_check.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
if ! command -v chromium > /dev/null || ! command -v chromedriver > /dev/null; then
  echo "page test: skipped (chromium or chromedriver is not installed; scripts/setup.sh installs them as root)"
  exit 77
fi
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2> /dev/null; rm -rf "$work"' EXIT

source "$root/scripts/serve_helpers.sh"
model="${1:-}"
sentence="${2:-A wolf hears your shop from a hill .}"
if [ -z "$model" ]; then
  model="$work/model"
  train_toy_model "$build/nmt" "$model"
fi

start_server "$work/serve.log" "$build/nmt" --model "$model" --max-length 30
screenshot=()
[ -n "${3:-}" ] && screenshot=(--screenshot "$3")
"$build/nmt_page_check" --port "$port" --sentence "$sentence" "${screenshot[@]}"
kill -TERM "$server"
wait "$server" || { echo "page test: nmt serve did not exit cleanly after SIGTERM" >&2; exit 1; }
server=""
echo "page test: passed"
