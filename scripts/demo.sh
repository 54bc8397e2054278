#!/usr/bin/env bash
# The demo: set-up and build, train an attentional GRU on the built-in toy corpus, translate its
# test set with beam search (with attention heatmaps), and score the translation with BLEU.
# Usage: scripts/demo.sh [extra nmt train options, e.g. --attention dot --model-dir models/demo-dot]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/build.sh nmt

# The model directory as training will resolve it (config file, then the options given).
model_dir=$(build/nmt train --config configs/demo.toml "$@" --dump-config | sed -n 's/^model-dir = "\(.*\)"$/\1/p')

build/nmt train --config configs/demo.toml --overwrite "$@"
build/nmt translate --model "$model_dir" --input data/toy/test.src --output "$model_dir/test.hyp" \
  --beam-size 5 --attention-dir "$model_dir/attention"
build/nmt evaluate --hyp "$model_dir/test.hyp" --ref data/toy/test.tgt
echo "demo: translations in $model_dir/test.hyp, attention heatmaps in $model_dir/attention/"
