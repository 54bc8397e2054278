#!/usr/bin/env bash
# Reranking on Multi30k: an n-best list from a left-to-right model, rescored with it and a
# right-to-left model (weights tuned for BLEU on val), against plain beam search.
#
# Usage: scripts/study/rerank.sh L2R_MODEL R2L_MODEL [OUT_DIR]
#   L2R_MODEL  a model trained with the recipe (configs/multi30k_de_en.toml)
#   R2L_MODEL  the same recipe with --reverse-target true
#   OUT_DIR    where the lists and outputs go (default: models/rerank/study)
# Environment: RERANK_N (the n-best size, default 8).
# Prints a Markdown table of test_2016_flickr BLEU and chrF2 (nmt evaluate) and the tuned weights.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
[ $# -ge 2 ] || { echo "usage: scripts/study/rerank.sh L2R_MODEL R2L_MODEL [OUT_DIR]" >&2; exit 2; }
l2r="$1" r2l="$2" out="${3:-models/rerank/study}" n="${RERANK_N:-8}"
data=data/multi30k nmt=build/nmt
[ -x "$nmt" ] || { echo "rerank: $nmt not found; run scripts/build.sh first" >&2; exit 1; }
mkdir -p "$out"

for split in val test_2016_flickr; do
  "$nmt" translate --model "$l2r" --input "$data/$split.de" --beam-size "$n" --n-best "$n" --quiet \
    --output "$out/$split.nbest$n"
done
"$nmt" translate --model "$l2r" --input "$data/test_2016_flickr.de" --beam-size 5 --quiet --output "$out/test.beam5"
"$nmt" translate --model "$r2l" --input "$data/test_2016_flickr.de" --beam-size 5 --quiet --output "$out/test.r2l.beam5"
test_nbest=(--src "$data/test_2016_flickr.de" --nbest "$out/test_2016_flickr.nbest$n")
tune=(--tune-src "$data/val.de" --tune-nbest "$out/val.nbest$n" --tune-ref "$data/val.en")
"$nmt" rerank --model "$l2r" "${test_nbest[@]}" --output "$out/test.l2r"
"$nmt" rerank --model "$l2r" --model "$r2l" "${test_nbest[@]}" --weights 1,1 --output "$out/test.both"
"$nmt" rerank --model "$l2r" --model "$r2l" "${test_nbest[@]}" "${tune[@]}" --output "$out/test.tuned" \
  2> "$out/tuned.log"

score() {
  "$nmt" evaluate --hyp "$1" --ref "$data/test_2016_flickr.en" --json |
    python3 -c 'import json, sys; r = json.load(sys.stdin); print("%.2f | %.2f" % (r["bleu"], r["chrf"]))'
}
echo "| test_2016_flickr | BLEU | chrF2 |"
echo "| --- | --- | --- |"
echo "| left-to-right, beam 5 | $(score "$out/test.beam5") |"
echo "| right-to-left, beam 5 | $(score "$out/test.r2l.beam5") |"
echo "| $n-best, rescored by left-to-right alone (its beam $n best) | $(score "$out/test.l2r") |"
echo "| $n-best, left-to-right + right-to-left, weights 1 and 1 | $(score "$out/test.both") |"
echo "| $n-best, left-to-right + right-to-left, weights tuned on val | $(score "$out/test.tuned") |"
echo
echo "tuning (stderr of nmt rerank):"
cat "$out/tuned.log"
