#!/usr/bin/env bash
# Training speed of every scorer against the additive recipe: nmt_bench train at the recipe's
# settings with only the attention (or coverage, or decoder-layers) changed, each run alternating
# with an additive run, so that drift of the machine falls on both sides. Prints one Markdown table:
# target tokens/s of each setting and of the additive runs beside it (means over the rounds), and
# their ratio. docs/benchmarks.md#attention-scorers has its ratios; the full table is in
# docs/dev/performance-notes.md.
#
# Usage: scripts/bench/scorers.sh [CONFIG]   (default configs/multi30k_de_en.toml)
# Environment: NMT_BENCH_STEPS (timed steps per run, default 40), NMT_BENCH_ROUNDS (default 2),
# NMT_BENCH_THREADS (default: all cores). Needs a build and the corpus (scripts/get_multi30k.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
config="${1:-configs/multi30k_de_en.toml}"
steps="${NMT_BENCH_STEPS:-40}"
rounds="${NMT_BENCH_ROUNDS:-2}"
threads="${NMT_BENCH_THREADS:-0}"
bench=build/nmt_bench
[ -x "$bench" ] || { echo "bench: $bench not found; run scripts/build.sh first" >&2; exit 1; }
[ -s data/multi30k/train.de ] || { echo "bench: data/multi30k not found; run scripts/get_multi30k.sh first" >&2; exit 1; }

settings=("--attention dot" "--attention scaled-dot" "--attention general" "--attention cosine"
          "--attention location" "--attention local-m" "--attention local-p" "--attention multi-head"
          "--coverage true" "--decoder-layers 2" "--attention none")
# target tokens/s of one nmt_bench train run (the row's fourth column)
rate() {
  # shellcheck disable=SC2086  # the setting is two words
  "$bench" --config "$config" train --threads "$threads" --bench-steps "$steps" --bench-warmup 10 $1 2>/dev/null |
    tail -n 1 | awk -F'|' '{ gsub(/ /, "", $5); print $5 }'
}

echo "| setting | target tokens/s | additive beside it | ratio |"
echo "| --- | --- | --- | --- |"
for setting in "${settings[@]}"; do
  ours=0 theirs=0
  for ((round = 0; round < rounds; round++)); do
    if ((round % 2 == 0)); then  # A B, then B A
      theirs=$(awk -v a="$theirs" -v b="$(rate "")" 'BEGIN { print a + b }')
      ours=$(awk -v a="$ours" -v b="$(rate "$setting")" 'BEGIN { print a + b }')
    else
      ours=$(awk -v a="$ours" -v b="$(rate "$setting")" 'BEGIN { print a + b }')
      theirs=$(awk -v a="$theirs" -v b="$(rate "")" 'BEGIN { print a + b }')
    fi
  done
  awk -v s="$setting" -v a="$ours" -v b="$theirs" -v r="$rounds" \
    'BEGIN { printf "| %s | %.0f | %.0f | %.2f |\n", s, a / r, b / r, a / b }'
done
