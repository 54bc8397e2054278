#!/usr/bin/env bash
# Trains the demo configuration once per attention scorer (additive also with coverage, and
# without attention), then prints a table: best dev BLEU (greedy, during training), test BLEU
# (beam 5) and training wall time.
# Usage: scripts/compare_attention.sh [config] [extra nmt train options]
# Models go to models/compare-<scorer>/, logs to models/compare-<scorer>.log. Expects a build
# (scripts/build.sh); NMT_BINARY names another nmt to run (default build/nmt).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
nmt="${NMT_BINARY:-build/nmt}"  # another binary can be given, e.g. a copy while rebuilding
config="${1:-configs/demo.toml}"
shift || true
test_source=$(sed -n 's/^dev-source = "\(.*\)dev\.src"$/\1test.src/p' "$config")
test_target="${test_source%.src}.tgt"

rows=()
for scorer in additive additive+coverage dot scaled-dot general cosine location local-m local-p multi-head none; do
  dir="models/compare-$scorer"
  options=(--attention "${scorer%+coverage}")
  [ "$scorer" = additive+coverage ] && options+=(--coverage true)
  start=$(date +%s)
  "$nmt" train --config "$config" "${options[@]}" --model-dir "$dir" --overwrite "$@" > "$dir.log" 2>&1 ||
    { echo "training $scorer failed: see $dir.log" >&2; exit 1; }
  seconds=$(( $(date +%s) - start ))
  dev_bleu=$(grep -o '"dev_bleu": [0-9.]*' "$dir/metrics.jsonl" | awk '{ if ($2 > best) best = $2 } END { printf "%.2f", best }')
  "$nmt" translate --model "$dir" --input "$test_source" --output "$dir/test.hyp" --beam-size 5 --quiet
  test_bleu=$("$nmt" evaluate --hyp "$dir/test.hyp" --ref "$test_target" --json | grep -o '"bleu": [0-9.]*' | cut -d' ' -f2)
  rows+=("$(printf '| %-17s | %8s | %9.2f | %6d s |' "$scorer" "$dev_bleu" "$test_bleu" "$seconds")")
  echo "${rows[-1]}"
done
echo
echo "| scorer            | dev BLEU | test BLEU | train time |"
echo "| ----------------- | -------- | --------- | ---------- |"
printf '%s\n' "${rows[@]}"
