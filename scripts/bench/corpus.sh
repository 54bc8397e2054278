#!/usr/bin/env bash
# The prepared-corpus benchmark: for corpora of 1 and 10 million pairs (the Multi30k training text
# repeated; made here), the time `nmt prepare` takes, the prepared file's size, the time from start
# to the first update of `nmt train`, its peak resident memory, and its training speed. With
# NMT_BASELINE_BINARY (an nmt built before the prepared corpus, which reads and encodes the text at
# every start) the same training rows for it, side by side.
#
# Usage: scripts/bench/corpus.sh [SIZES]   (default "1000000 10000000")
# Environment: NMT_BENCH_DIR (scratch space, default /tmp/nmt_corpus_bench; 10M pairs take about
# 3 GB), NMT_BENCH_THREADS (default: all cores). Needs a build and scripts/get_multi30k.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
sizes="${1:-1000000 10000000}"
# shellcheck source=scripts/bench/corpus_setup.sh
source scripts/bench/corpus_setup.sh

# Runs "$@" under /usr/bin/time; prints "SECONDS PEAK_RSS_MB" (or "failed -" with its output's
# last lines on stderr).
measure() {
  /usr/bin/time -f "%e %M" -o "$scratch/time.txt" "$@" > "$scratch/out.txt" 2>&1 ||
    { tail -n 5 "$scratch/out.txt" >&2; echo "failed -"; return; }
  awk '{ printf "%.1f %.0f", $1, $2 / 1024 }' "$scratch/time.txt"
}

# The recipe's settings; the baseline gets them without the keys it predates.
grep -v '^corpus-dir' configs/multi30k_de_en.toml > "$scratch/baseline.toml"

train_arguments() {  # $1 pairs, $2 model dir, $3 config (default the recipe's)
  echo "--config ${3:-configs/multi30k_de_en.toml} --train-source $scratch/$1.de --train-target $scratch/$1.en" \
    "--dev-source $scratch/dev.de --dev-target $scratch/dev.en --model-dir $2 --threads $threads" \
    "--max-epochs 1 --max-minutes 0 --validate-every 1000000 --keep-checkpoints 0 --overwrite"
}

# Mean target tokens/s of the log lines of a run.
speed() { grep -o '[0-9]* target tok/s' "$1" | awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "-" }'; }

echo "| pairs | build | prepare (s) | prepared file | start to first update (s) | peak RSS (MB) | target tokens/s |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for pairs in $sizes; do
  make_corpus "$pairs"
  dir="$scratch/model-$pairs"
  rm -rf "$dir"  # prepare from scratch: vocabulary and encoding
  # shellcheck disable=SC2046
  read -r prepare_seconds _ <<< "$(measure "$nmt" prepare $(train_arguments "$pairs" "$dir" | sed 's/--overwrite//'))"
  size=$( (du -m "$dir/train.corpus" 2> /dev/null || echo "-") | cut -f1)
  # One update (then the 20-pair validation and a checkpoint): an upper bound of the time to the first.
  # shellcheck disable=SC2046
  read -r first_seconds _ <<< "$(measure "$nmt" train $(train_arguments "$pairs" "$dir") --max-steps 1)"
  # 100 updates: peak memory and speed.
  # shellcheck disable=SC2046
  read -r _ peak <<< "$(measure "$nmt" train $(train_arguments "$pairs" "$dir") --max-steps 100 --log-every 20)"
  echo "| $pairs | prepared corpus | $prepare_seconds | $size MB | $first_seconds | $peak | $(speed "$dir/train.log") |"
  if [ -n "${NMT_BASELINE_BINARY:-}" ]; then
    base_dir="$scratch/base-$pairs"
    rm -rf "$base_dir"
    # shellcheck disable=SC2046
    read -r first_seconds _ <<< "$(measure "$NMT_BASELINE_BINARY" train \
      $(train_arguments "$pairs" "$base_dir" "$scratch/baseline.toml") --max-steps 1)"
    # shellcheck disable=SC2046
    read -r _ peak <<< "$(measure "$NMT_BASELINE_BINARY" train \
      $(train_arguments "$pairs" "$base_dir" "$scratch/baseline.toml") --max-steps 100 --log-every 20)"
    echo "| $pairs | in memory (baseline) | - | - | $first_seconds | $peak | $(speed "$base_dir/train.log") |"
  fi
done
