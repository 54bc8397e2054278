#!/usr/bin/env bash
# One attention heatmap per run of a study, all on the same dev sentence, to see how each scorer
# attends (nmt translate --attention-dir, beam 5, each run's best.ckpt).
#
# Usage: scripts/study/heatmaps.sh [STUDY_DIR [OUTPUT_DIR [LINE]]]
#   STUDY_DIR   a directory of scripts/study/run.sh (default models/study)
#   OUTPUT_DIR  where NAME.svg and NAME.json go for each run NAME (default STUDY_DIR/heatmaps)
#   LINE        the line of data/multi30k/val.de to translate (default 156, "Eine Frau liest eine
#               Karte und sitzt dabei auf der Kante eines Sofas, während eine andere Frau mit einem
#               Trinkglas in der Hand neben ihr steht.": 33 subwords, longer than a local window
#               of 21, with a verb-final clause that English reorders)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
study_dir="${1:-models/study}"
output_dir="${2:-$study_dir/heatmaps}"
line="${3:-156}"
[[ $line =~ ^[1-9][0-9]*$ ]] || { echo "heatmaps: LINE must be a line number (1, 2, ...), not '$line'" >&2; exit 2; }
nmt="$study_dir/nmt"
[ -x "$nmt" ] || nmt=build/nmt
sentence=$(sed -n "${line}p" data/multi30k/val.de)
[ -n "$sentence" ] || { echo "heatmaps: data/multi30k/val.de has no line $line (or it is empty)" >&2; exit 1; }
mkdir -p "$output_dir"
# Written beside the outputs and renamed into place: an interrupted run leaves no half-written file.
scratch=$(mktemp -d "$output_dir/.tmp.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
runs=0
for run in "$study_dir"/*/; do
  name=$(basename "$run")
  [ -f "$run/best.ckpt" ] || continue
  translation=$(echo "$sentence" | "$nmt" translate --model "$run" --attention-dir "$scratch/$name" --quiet)
  [ -f "$scratch/$name/stdin.00001.svg" ] || { echo "heatmaps: $name translated the sentence to nothing; no heatmap" >&2; continue; }
  mv "$scratch/$name/stdin.00001.svg" "$output_dir/$name.svg"
  mv "$scratch/$name/stdin.00001.json" "$output_dir/$name.json"
  printf "%s\t%s\n" "$name" "$translation"
  runs=$((runs + 1))
done
[ "$runs" -gt 0 ] || { echo "heatmaps: no run in $study_dir has a best.ckpt; train them with scripts/study/run.sh" >&2; exit 1; }
