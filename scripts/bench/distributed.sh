#!/usr/bin/env bash
# The distributed rows: training speed of the Multi30k recipe as 1 process x 1 thread; two separate
# 1-thread trainings at once that never communicate (the most two processes can reach on this
# machine, whatever the transport); 2 processes x 1 thread (nmt train --nproc 2: Gloo over loopback
# TCP), also with --accumulate 2; and 1 process x 2 threads. Each rate is taken from nmt train's own
# log (metrics.jsonl: target tokens/s of its log windows, the first left out as warm-up). Then one
# update's gradient all-reduce alone (nmt_bench allreduce, two ranks), with the bytes nmt train logs.
# Prints Markdown tables; docs/benchmarks.md#distributed-training has them.
#
# Usage: scripts/bench/distributed.sh [CONFIG]   (default configs/multi30k_de_en.toml)
# Environment: NMT_BENCH_STEPS (updates per run, default 300). Needs a build (scripts/build.sh) and
# the corpus (scripts/get_multi30k.sh). Runs one thing at a time: the rows share the machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
config="${1:-configs/multi30k_de_en.toml}"
steps="${NMT_BENCH_STEPS:-300}"
nmt=build/nmt
bench=build/nmt_bench
[ -x "$nmt" ] && [ -x "$bench" ] || { echo "bench: build/nmt or build/nmt_bench missing; run scripts/build.sh" >&2; exit 1; }
[ -s data/multi30k/val.de ] || { echo "bench: data/multi30k not found; run scripts/get_multi30k.sh first" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A short dev set: each run validates once, at its end, outside the timed windows.
head -n 50 data/multi30k/val.de > "$work/dev.de"
head -n 50 data/multi30k/val.en > "$work/dev.en"
common=(--config "$config" --dev-source "$work/dev.de" --dev-target "$work/dev.en" --corpus-dir "$work/corpus"
        --max-steps "$steps" --max-minutes 0 --validate-every 1000000 --log-every 50 --keep-checkpoints 0)
"$nmt" prepare "${common[@]}" --model-dir "$work/prepare" 2> "$work/prepare.log"

# mean target tokens/s of the log windows after the first
rate() {
  grep '"event":"train"' "$1/metrics.jsonl" | tail -n +2 |
    sed 's/.*"target_tokens_per_second":\([0-9.e+]*\).*/\1/' | awk '{ s += $1; n++ } END { printf "%.0f", s / n }'
}
# seconds per update between the first and the last log line
update_seconds() {
  grep '"event":"train"' "$1/metrics.jsonl" | sed 's/.*"step":\([0-9]*\),.*"elapsed_seconds":\([0-9.e+]*\).*/\1 \2/' |
    awk 'NR == 1 { s0 = $1; t0 = $2 } { s = $1; t = $2 } END { printf "%.3f", (t - t0) / (s - s0) }'
}

run() {  # name, then nmt train's options
  local name="$1"
  shift
  "$nmt" train "${common[@]}" --model-dir "$work/$name" "$@" > "$work/$name.log" 2>&1 ||
    { tail -n 20 "$work/$name.log" >&2; exit 1; }
}

run one_by_one --threads 1
# two separate trainings side by side: their summed rate, and the slower one's seconds per update
"$nmt" train "${common[@]}" --model-dir "$work/apart_b" --threads 1 --seed 2 > "$work/apart_b.log" 2>&1 &
apart_b=$!
run apart --threads 1
wait "$apart_b" || { tail -n 20 "$work/apart_b.log" >&2; exit 1; }
run two_processes --threads 1 --nproc 2
run two_processes_accumulate --threads 1 --nproc 2 --accumulate 2
run one_by_two --threads 2
single=$(rate "$work/one_by_one")
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "Machine: $cpu, $(nproc) cores; $steps updates per run, batch-tokens per rank as in $config"
echo
echo "| setting | target tokens/s | of 2 x (1 x 1) | seconds per update | all-reduce wait after backward |"
echo "| --- | --- | --- | --- | --- |"
for name in one_by_one apart two_processes two_processes_accumulate one_by_two; do
  r=$(rate "$work/$name")
  seconds=$(update_seconds "$work/$name")
  case "$name" in
    one_by_one) label="1 process x 1 thread" ;;
    apart)
      label="2 separate 1-thread trainings at once, no communication (sum)"
      r=$((r + $(rate "$work/apart_b")))
      seconds=$(printf '%s\n%s\n' "$seconds" "$(update_seconds "$work/apart_b")" | sort -n | tail -n 1)
      ;;
    two_processes) label="2 processes x 1 thread (Gloo, loopback TCP)" ;;
    two_processes_accumulate) label="2 processes x 1 thread, --accumulate 2" ;;
    one_by_two) label="1 process x 2 threads" ;;
  esac
  wait_ms=$(sed -n 's/.*waiting for all-reduces after backward (\([0-9.]*\) ms per update).*/\1 ms/p' "$work/$name.log")
  echo "| $label | $r | $(awk -v r="$r" -v s="$single" 'BEGIN { printf "%.0f%%", 100 * r / (2 * s) }') |" \
       "$seconds | ${wait_ms:--} |"
done

bytes_mb=$(sed -n 's/.*distributed: \([0-9.]*\) MB all-reduced per update.*/\1/p' "$work/two_processes.log")
bytes=$(awk -v m="$bytes_mb" 'BEGIN { printf "%.0f", m * 1e6 }')
port=$(sed -n 's/.*master 127.0.0.1:\([0-9]*\).*/\1/p' "$work/two_processes.log" | head -n 1)
echo
echo "| what | setting | per all-reduce | bus bandwidth |"
echo "| --- | --- | --- | --- |"
# Ranks started by hand prove a shared secret to each other (nmt train --nproc makes its own).
NMT_RENDEZVOUS_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export NMT_RENDEZVOUS_SECRET
RANK=1 WORLD_SIZE=2 MASTER_PORT="$port" "$bench" allreduce --bytes "$bytes" --threads 1 &
RANK=0 WORLD_SIZE=2 MASTER_PORT="$port" "$bench" allreduce --bytes "$bytes" --threads 1
wait
