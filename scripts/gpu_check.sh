#!/usr/bin/env bash
# The checks that need a GPU, on a machine with one and a CUDA build (scripts/libtorch2.sh, or
# NMT_LIBTORCH=... scripts/build.sh nmt nmt_tests):
#   1. the [cuda] cases of the suite: every scorer's loss and gradients, greedy and beam search,
#      and an exact resume, on the GPU against the CPU (tests/test_cuda.cpp; the decoder's GPU
#      graph loop and the recorded pass of every decoder, replayed, in tests/test_model.cpp);
#   2. the demo trained with --device cuda, its test set translated on the GPU and on the CPU
#      (the same lines?) and scored;
#   3. data-parallel training over NCCL, two ranks on two GPUs (skipped with one GPU);
#   4. the Multi30k recipe with --device cuda for NMT_GPU_MINUTES of training (default 60, the
#      recipe's budget), translated with beam 5 on the GPU and scored (skipped without
#      data/multi30k: scripts/get_multi30k.sh).
# Each part prints its wall time; the last lines say what passed.
# Usage: scripts/gpu_check.sh
# Environment: NMT_BUILD_DIR (the CUDA build, default build-libtorch), NMT_GPU_MINUTES (60),
# NMT_GPU_MODELS (where the models go, default models/), NMT_GPU_PORT (the NCCL check's
# MASTER_PORT, default 29533).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/checks.sh"
cd "$root"
build="${NMT_BUILD_DIR:-$root/build-libtorch}"
nmt="$build/nmt"
models="${NMT_GPU_MODELS:-$root/models}"
minutes="${NMT_GPU_MINUTES:-60}"
if [ ! -x "$nmt" ] || [ ! -x "$build/nmt_tests" ]; then
  echo "gpu_check: no $nmt or $build/nmt_tests: build the CUDA variant first (scripts/libtorch2.sh)" >&2
  exit 1
fi
nvidia-smi -L 2>/dev/null || echo "gpu_check: nvidia-smi is not available"

# Seconds since `start` (an $EPOCHREALTIME), one decimal.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# Trains configs/demo.toml on the GPU, then translates its test set on the GPU and on the CPU.
demo_on_gpu() {
  local dir="$models/demo-cuda" start
  start=$EPOCHREALTIME
  "$nmt" train --config configs/demo.toml --device cuda --model-dir "$dir" --overwrite || return 1
  echo "gpu_check: demo trained on the GPU in $(since "$start") s"
  for device in cuda cpu; do
    start=$EPOCHREALTIME
    "$nmt" translate --model "$dir" --input data/toy/test.src --output "$dir/test.$device.hyp" --beam-size 5 \
      --device "$device" --quiet || return 1
    echo "gpu_check: demo test set translated on $device (beam 5) in $(since "$start") s"
    "$nmt" evaluate --hyp "$dir/test.$device.hyp" --ref data/toy/test.tgt || return 1
  done
  local lines same
  lines=$(wc -l < "$dir/test.cuda.hyp")
  same=$(paste -d '\t' "$dir/test.cuda.hyp" "$dir/test.cpu.hyp" | awk -F '\t' '$1 == $2' | wc -l)
  echo "gpu_check: $same of $lines demo translations are the same on the GPU and the CPU"
  [ "$same" -eq "$lines" ]
}

# Two ranks on two GPUs through torchrun's variables: NCCL's process group, its all-reduce and the
# replica checks. NCCL takes one GPU per rank, so a machine with one GPU skips this.
nccl_on_gpus() {
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$gpus" -lt 2 ]; then
    echo "$gpus GPU(s) here: data parallel over NCCL needs 2"
    return 77
  fi
  local dir="$models/demo-2gpus" rank status=0
  local pids=()
  # Ranks started by hand prove a shared secret to each other (nmt train --nproc makes its own).
  local secret
  secret="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
  for rank in 1 0; do
    NMT_RENDEZVOUS_SECRET="$secret" WORLD_SIZE=2 RANK=$rank LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="${NMT_GPU_PORT:-29533}" \
      "$nmt" train --config configs/demo.toml --device cuda --model-dir "$dir" --overwrite --max-steps 40 \
      --validate-every 20 --check-replicas 10 > "$dir.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in 0 1; do wait "${pids[$rank]}" || status=1; done
  cat "$dir.rank0.log" "$dir.rank1.log"
  [ "$status" -eq 0 ] && grep -q "nccl" "$dir.rank0.log"
}

# The Multi30k recipe on the GPU for $minutes minutes of training, then beam 5 on the GPU.
multi30k_on_gpu() {
  if [ ! -f data/multi30k/train.de ]; then
    echo "no data/multi30k/train.de (scripts/get_multi30k.sh)"
    return 77
  fi
  local dir="$models/multi30k_de_en-cuda" start
  start=$EPOCHREALTIME
  "$nmt" train --config configs/multi30k_de_en.toml --device cuda --model-dir "$dir" --overwrite \
    --max-minutes "$minutes" || return 1
  echo "gpu_check: Multi30k trained on the GPU in $(since "$start") s (budget $minutes min)"
  start=$EPOCHREALTIME
  "$nmt" translate --model "$dir" --input data/multi30k/test_2016_flickr.de --output "$dir/test.beam5.hyp" \
    --beam-size 5 --device cuda --quiet || return 1
  echo "gpu_check: test_2016_flickr translated on the GPU (beam 5) in $(since "$start") s"
  "$nmt" evaluate --hyp "$dir/test.beam5.hyp" --ref data/multi30k/test_2016_flickr.en
}

mkdir -p "$models"
run_check cuda-cases "$build/nmt_tests" "[cuda]"
run_check demo demo_on_gpu
run_check nccl nccl_on_gpus
run_check multi30k multi30k_on_gpu
print_summary gpu_check
