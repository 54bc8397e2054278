#!/usr/bin/env bash
# The Multi30k German->English recipe in one command: get the corpus, build, train
# configs/multi30k_de_en.toml (one hour on two cores), then translate test_2016_flickr with
# greedy search and with beam 5 (and the average of the last checkpoints with beam 5), score them
# with sacreBLEU-compatible BLEU (cased, 13a) and chrF, and draw the training curve.
# Usage: scripts/multi30k.sh [extra nmt train options, e.g. --attention dot --model-dir models/m30k-dot]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/get_multi30k.sh
scripts/build.sh nmt

# The model directory as training will resolve it (config file, then the options given).
model_dir=$(build/nmt train --config configs/multi30k_de_en.toml "$@" --dump-config | sed -n 's/^model-dir = "\(.*\)"$/\1/p')

build/nmt train --config configs/multi30k_de_en.toml --overwrite "$@"
test_source=data/multi30k/test_2016_flickr.de
test_reference=data/multi30k/test_2016_flickr.en
for beam in 1 5; do
  start=$EPOCHREALTIME
  build/nmt translate --model "$model_dir" --input "$test_source" --output "$model_dir/test.beam$beam.hyp" \
    --beam-size "$beam" --quiet
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  echo "beam $beam: translated $test_source in $seconds s (model loading included)"
  build/nmt evaluate --hyp "$model_dir/test.beam$beam.hyp" --ref "$test_reference"
done
# The average of the last three kept checkpoints (keep-checkpoints in the config), beam 5.
build/nmt average --model "$model_dir" --last 3
build/nmt translate --model "$model_dir" --checkpoint "$model_dir/averaged.ckpt" --input "$test_source" \
  --output "$model_dir/test.averaged.beam5.hyp" --beam-size 5 --quiet
echo "average of the last 3 checkpoints, beam 5:"
build/nmt evaluate --hyp "$model_dir/test.averaged.beam5.hyp" --ref "$test_reference"
python3 scripts/plot_training.py "$model_dir/training_curve.svg" "$model_dir"
