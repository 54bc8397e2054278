#!/usr/bin/env bash
# Fuzzing: the libFuzzer targets of tests/fuzz (the config reader, the parallel-text reader, the
# checkpoint loader, the BLEU tokenizer and scorers, nmt serve's request reader, the markup reader
# and its placement), built with clang, AddressSanitizer and UndefinedBehaviorSanitizer in
# build-fuzz/, each run for a bounded time from its seed corpus
# (tests/fuzz/NAME/; the checkpoint target also gets a real checkpoint trained here). Fails on
# the first crash, leak, sanitizer report or timeout, and keeps the input that caused it in
# build-fuzz/crashes/ (replay: build-fuzz/fuzz_NAME FILE).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]    (default 30; NMT_BUILD_JOBS: compile jobs, default 2)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-30}"
build="$root/build-fuzz"
targets=(config corpus checkpoint bleu request markup)
"$root/scripts/setup.sh"
# -O1 -g1, as libFuzzer's documentation builds its targets: line tables name every frame.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DNMT_FUZZ=ON -DNMT_BUILD_TESTS=OFF -DNMT_PYTHON=OFF \
  > "$root/build-fuzz.configure.log" 2>&1 || { cat "$root/build-fuzz.configure.log"; exit 1; }
rm -f "$root/build-fuzz.configure.log"
cmake --build "$build" -j "${NMT_BUILD_JOBS:-2}" --target nmt "${targets[@]/#/fuzz_}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work"  # the targets' input files
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"
mkdir -p "$build/crashes"

# A real checkpoint as a seed, so that mutations reach the model's records, not only the zip.
toy="$root/data/toy"
"$build/nmt" train --train-source "$toy/train.src" --train-target "$toy/train.tgt" --dev-source "$toy/dev.src" \
  --dev-target "$toy/dev.tgt" --model-dir "$work/model" --vocab-size 80 --byte-fallback false --embedding-size 4 --encoder-hidden-size 2 \
  --decoder-hidden-size 4 --attention-size 4 --max-steps 1 --validate-every 1 --threads 1 > "$work/train.log" 2>&1 ||
  { tail -3 "$work/train.log"; exit 1; }

for name in "${targets[@]}"; do
  corpus="$work/corpus_$name"
  mkdir -p "$corpus"
  [ "$name" = checkpoint ] && cp "$work/model/best.ckpt" "$corpus/"
  echo "fuzz: $name for $seconds s"
  # The request reader takes bodies of up to 2 MiB, as a hostile client sends (deep nesting, long
  # strings); the other targets keep libFuzzer's default length.
  max_len=()
  [ "$name" = request ] && max_len=(-max_len=2097152)
  if ! "$build/fuzz_$name" "$corpus" "$root/tests/fuzz/$name" "${max_len[@]}" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=4096 -artifact_prefix="$build/crashes/${name}_" > "$work/$name.log" 2>&1; then
    tail -40 "$work/$name.log"
    echo "fuzz: $name FAILED; the input is in $build/crashes/" >&2
    exit 1
  fi
  grep -E "^(#[0-9]+\s+DONE|Done [0-9]+ runs)" "$work/$name.log" | tail -1 | sed "s/^/fuzz: $name: /"
done
echo "fuzz: all targets ran $seconds s each without a crash"
