#!/usr/bin/env bash
# What a model file costs to store and load in the current checkpoint format (safetensors) and in
# the format before it (a LibTorch archive, read with LibTorch's own reader as nmt did), from one
# run's last.ckpt: the model alone (as best.ckpt holds it) and the whole training state. Loads
# alternate between the formats, one thread, the files in the page cache.
#
# Usage: scripts/bench/checkpoint.sh [MODEL_DIR] [ROUNDS]
#   MODEL_DIR  a trained run (default: models/multi30k_de_en if it is there, else models/demo,
#              trained by scripts/demo.sh when missing)
#   ROUNDS     loads of each file (default 9)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
model="${1:-}"
if [ -z "$model" ]; then
  model=models/demo
  [ -f models/multi30k_de_en/last.ckpt ] && model=models/multi30k_de_en
fi
[ -f "$model/last.ckpt" ] || { [ "$model" = models/demo ] && scripts/demo.sh > /dev/null; }
[ -f "$model/last.ckpt" ] || { echo "checkpoint.sh: $model/last.ckpt not found: give a trained run" >&2; exit 1; }
scripts/build.sh nmt_checkpoint_bench > /dev/null
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
echo "$model/last.ckpt, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
build/nmt_checkpoint_bench --checkpoint "$model/last.ckpt" --rounds "${2:-9}" --scratch "$scratch"
