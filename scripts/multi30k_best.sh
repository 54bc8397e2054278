#!/usr/bin/env bash
# The best Multi30k German->English system this toolkit trains in one hour of wall-clock on two
# cores, in one command. After getting the corpus and building (not counted), within the hour
# (BEST_MINUTES):
#  1. the corpus is encoded once with separate 8k BPE vocabularies for German and English
#     (nmt prepare), shared by both members so that they can decode together;
#  2. two members train side by side, one thread each: the recipe (configs/multi30k_de_en.toml)
#     with sizes 384 and separate vocabularies, one with additive attention and one with cosine;
#  3. for each member, its best checkpoint and the average of its last 3 kept checkpoints are
#     scored on the dev set (val, beam 5, length penalty 0.6) and the better one is kept
#     (best.ckpt was itself chosen by dev greedy BLEU during training, which favours it
#     slightly); the ensemble of the two is kept when it beats the better member on val.
# Then, once, the chosen system translates test_2016_flickr (the same search) and its BLEU
# (sacreBLEU default: cased, 13a) and chrF2 are printed. Nothing is chosen on the test set: the
# length penalty 0.6 was the best of 0.6, 1.0 and 1.4 for an earlier run's ensemble on val; on a
# later run's val, 1.0 was better by as much, about 0.2 BLEU (docs/dev/results-notes.md).
#
# Usage: scripts/multi30k_best.sh [OUTPUT_DIR]          (default models/multi30k_best)
# Environment: BEST_MINUTES, the wall-clock budget of steps 1-3 (default 60); BEST_PRECISION, the
# members' precision (fp32, the default, or bf16 on a CPU with bfloat16 products: docs/usage.md);
# BEST_SUBWORD_ALPHA, the members' subword-alpha (default 0: no subword regularisation; the
# recipe's BPE vocabularies make it BPE-dropout).
# Writes OUTPUT_DIR/corpus (the encoded corpus and vocabularies), OUTPUT_DIR/MEMBER (each run),
# OUTPUT_DIR/val.tsv (every dev score), OUTPUT_DIR/test.hyp, OUTPUT_DIR/test.txt (the test
# scores), OUTPUT_DIR/summary.txt, OUTPUT_DIR/prepare.log and OUTPUT_DIR/MEMBER.out (each
# member's log).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/get_multi30k.sh
scripts/build.sh nmt
source scripts/lib/members.sh
name=best

out="${1:-models/multi30k_best}"
budget="${BEST_MINUTES:-60}"
precision="${BEST_PRECISION:-fp32}"
subword_alpha="${BEST_SUBWORD_ALPHA:-0}"
[[ $precision == fp32 || $precision == bf16 ]] || { echo "best: BEST_PRECISION must be fp32 or bf16, not '$precision'" >&2; exit 2; }
[[ $subword_alpha =~ ^(0|0?[.][0-9]+|1)$ ]] || { echo "best: BEST_SUBWORD_ALPHA must be a number in [0, 1], not '$subword_alpha'" >&2; exit 2; }
[[ $budget =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "best: BEST_MINUTES must be a number of minutes, not '$budget'" >&2; exit 2; }
# What steps 2-3 need after training stops: each member's last validation and checkpoint, the
# averages, and five dev translations (the last by the ensemble).
reserve_minutes=2
recipe=(--config configs/multi30k_de_en.toml --corpus-dir "$out/corpus" --joint-vocab false --vocab-size 8000)
sizes=(--embedding-size 384 --encoder-hidden-size 384 --decoder-hidden-size 384 --attention-size 384)

mkdir -p "$out"
rm -f "$out/summary.txt" "$out/test.txt" "$out/test.hyp"   # no result of an earlier run looks current
start=$(date +%s)
minutes_left() { awk -v s="$start" -v n="$(date +%s)" -v b="$budget" 'BEGIN { printf "%.2f", b - (n - s) / 60 }'; }

echo "best: $(date +%H:%M:%S) preparing the corpus in $out/corpus"
build/nmt prepare "${recipe[@]}" --model-dir "$out/corpus" > "$out/prepare.log" 2>&1 ||
  { cat "$out/prepare.log"; exit 1; }

train_minutes=$(awk -v l="$(minutes_left)" -v r="$reserve_minutes" 'BEGIN { printf "%.2f", l - r }')
if awk -v t="$train_minutes" 'BEGIN { exit !(t < 1) }'; then
  echo "best: only $train_minutes minutes of training would be left of BEST_MINUTES=$budget; give it more" >&2
  exit 2
fi
echo "best: $(date +%H:%M:%S) training ${members[*]} side by side, $train_minutes minutes each"
train_members "$train_minutes" "${recipe[@]}" "${sizes[@]}" --precision "$precision" --subword-alpha "$subword_alpha"

choose_on_val
used=$(awk -v l="$(minutes_left)" -v b="$budget" 'BEGIN { printf "%.1f", b - l }')
echo "best: $(date +%H:%M:%S) chosen on val after $used minutes: ${system[*]}"
column -t -s $'\t' "$out/val.tsv" 2>/dev/null || cat "$out/val.tsv"

test_once
{
  echo "wall-clock of preparing, training and choosing: $used minutes (budget $budget)"
  echo "system: ${system[*]}"
  cat "$out/val.tsv"
  echo "test_2016_flickr, ${search[*]}:"
  cat "$out/test.txt"
} > "$out/summary.txt.tmp"
mv "$out/summary.txt.tmp" "$out/summary.txt"
