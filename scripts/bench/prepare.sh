#!/usr/bin/env bash
# `nmt prepare` with and without the word cache (text/vocabulary.h, WordCachedEncoder;
# NMT_WORD_CACHE=off), alternating, on a corpus of N pairs (the Multi30k training text repeated, as
# scripts/bench/corpus.sh makes it), at the recipe's settings. Prints each run's seconds and peak
# resident memory, and whether the two prepared files are byte-identical.
#
# Usage: scripts/bench/prepare.sh [PAIRS] [ROUNDS]   (default 10000000 and 1)
# Environment: NMT_BENCH_DIR (scratch space, default /tmp/nmt_corpus_bench; 10M pairs take about
# 3 GB), NMT_BENCH_THREADS (default: all cores). Needs a build and scripts/get_multi30k.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
pairs="${1:-10000000}" rounds="${2:-1}"
# shellcheck source=scripts/bench/corpus_setup.sh
source scripts/bench/corpus_setup.sh
make_corpus "$pairs"

prepare() {  # $1 model dir, $2 NMT_WORD_CACHE value -> "SECONDS PEAK_RSS_MB"
  rm -rf "$1"
  NMT_WORD_CACHE="$2" /usr/bin/time -f "%e %M" -o "$scratch/time.txt" "$nmt" prepare \
    --config configs/multi30k_de_en.toml --train-source "$scratch/$pairs.de" --train-target "$scratch/$pairs.en" \
    --dev-source "$scratch/dev.de" --dev-target "$scratch/dev.en" --model-dir "$1" --threads "$threads" \
    > "$scratch/out.txt" 2>&1 || { tail -n 5 "$scratch/out.txt" >&2; exit 1; }
  awk '{ printf "%.1f %.0f", $1, $2 / 1024 }' "$scratch/time.txt"
}

echo "$pairs pairs, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
echo "| round | word cache | prepare (s) | peak RSS (MB) |"
echo "| --- | --- | --- | --- |"
for round in $(seq "$rounds"); do
  for cache in off on; do
    read -r seconds peak <<< "$(prepare "$scratch/prepare-$cache" "$cache")"
    echo "| $round | $cache | $seconds | $peak |"
  done
done
if cmp -s "$scratch/prepare-off/train.corpus" "$scratch/prepare-on/train.corpus"; then
  echo "train.corpus: byte-identical with and without the cache"
else
  echo "train.corpus: DIFFERENT with and without the cache" >&2
  exit 1
fi
