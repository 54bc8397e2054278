#!/usr/bin/env bash
# The demo: set-up and build, train an attentional GRU on the built-in toy corpus, translate its
# test set with beam search (with attention heatmaps), and score the translation with BLEU.
# Usage: scripts/demo.sh [extra nmt train options, e.g. --attention dot --model-dir models/demo-dot]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/build.sh

model_dir=models/demo
for ((i = 1; i <= $#; ++i)); do
  if [ "${!i}" = "--model-dir" ]; then j=$((i + 1)); model_dir="${!j}"; fi
done

build/nmt train --config configs/demo.toml --overwrite "$@"
build/nmt translate --model "$model_dir" --input data/toy/test.src --output "$model_dir/test.hyp" \
  --beam-size 5 --attention-dir "$model_dir/attention"
build/nmt evaluate --hyp "$model_dir/test.hyp" --ref data/toy/test.tgt
echo "demo: translations in $model_dir/test.hyp, attention heatmaps in $model_dir/attention/"
