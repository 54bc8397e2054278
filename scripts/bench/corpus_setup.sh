# Sourced by scripts/bench/corpus.sh and scripts/bench/prepare.sh: checks the build and data, sets
# $scratch (NMT_BENCH_DIR, default /tmp/nmt_corpus_bench), $threads (NMT_BENCH_THREADS, default 0:
# all cores) and $nmt, writes a 20-pair dev set there, and defines make_corpus.
scratch="${NMT_BENCH_DIR:-/tmp/nmt_corpus_bench}"
threads="${NMT_BENCH_THREADS:-0}"
nmt="build/nmt"
[ -x "$nmt" ] || { echo "bench: $nmt not found; run scripts/build.sh first" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time not found (Debian package time)" >&2; exit 1; }
[ -s data/multi30k/train.de ] || { echo "bench: data/multi30k not found; run scripts/get_multi30k.sh" >&2; exit 1; }
mkdir -p "$scratch"
# A 20-pair dev set keeps the one validation at the end of each short run negligible.
head -n 20 data/multi30k/val.de > "$scratch/dev.de"
head -n 20 data/multi30k/val.en > "$scratch/dev.en"

make_corpus() {  # $1 pairs -> $scratch/N.de, N.en: the Multi30k training text repeated
  local pairs=$1 lines
  lines=$(wc -l < data/multi30k/train.de)
  for side in de en; do
    if [ ! -s "$scratch/$pairs.$side" ]; then
      awk -v pairs="$pairs" -v lines="$lines" '{ text[NR] = $0 }
        END { for (i = 0; i < pairs; i++) print text[i % lines + 1] }' "data/multi30k/train.$side" \
        > "$scratch/$pairs.$side.tmp"
      mv "$scratch/$pairs.$side.tmp" "$scratch/$pairs.$side"  # whole or absent
    fi
  done
}
