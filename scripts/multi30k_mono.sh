#!/usr/bin/env bash
# The best Multi30k German->English system this toolkit trains from Multi30k's own data, parallel
# and monolingual, in two hours of wall-clock on two cores, in one command. After getting the
# corpus and building (not counted), within the budget (MONO_MINUTES):
#  1. the monolingual English: task 2's captions of the training images (scripts/get_multi30k.sh
#     --mono), without the lines of task 1's training, dev and test English, each line once;
#  2. the reverse model, English->German: the recipe (configs/multi30k_de_en.toml) with the
#     languages swapped, on both cores;
#  3. back-translation: the reverse model translates the English captions into German by sampling
#     from its 10 likeliest subwords at each step (nmt synthesize --sampling-topk 10), in int8
#     (MONO_BT: or beam search, or beam search with noise);
#  4. two forward members side by side, one thread each, as scripts/multi30k_best.sh trains them
#     (sizes 384, separate 8k vocabularies, additive and cosine), on the real corpus (weight
#     MONO_REAL_WEIGHT, each pair that many times an epoch) and the synthetic one, whose German
#     sources start with the tag <bt> (MONO_TAG=no: untagged);
#  5. for each member its best checkpoint and the average of its last 3 kept ones scored on val
#     (beam 5, length penalty 0.6), the better kept; the ensemble when it beats the better member.
# Then, once, the chosen system translates test_2016_flickr and its BLEU (sacreBLEU default:
# cased, 13a) and chrF2 are printed. Nothing is chosen on the test set.
#
# Usage: scripts/multi30k_mono.sh [OUTPUT_DIR]          (default models/multi30k_mono)
# Environment: MONO_MINUTES, the wall-clock budget of steps 1-5 (default 120); MONO_REVERSE_MINUTES,
# the reverse model's share (default 22); MONO_REAL_WEIGHT (default 2); MONO_LINES, how many
# English lines to back-translate (default: all, about 115,000); MONO_BT, how: sample (the
# default), beam (beam 5) or beam-noise (beam 5, then each word deleted or replaced by <blank> with
# probability 0.1 and the words shuffled by up to 3 places, as Edunov et al. 2018); MONO_TAG (yes,
# the default, or no); MONO_REVERSE_MODEL, a reverse model directory to use instead of training
# one (for studies that vary only later steps); MONO_PRECISION (fp32, or bf16 on a CPU with
# bfloat16 products); MONO_SUBWORD_ALPHA, the members' subword-alpha (default 0: none; BPE-dropout
# with the recipe's BPE vocabularies).
# Writes OUTPUT_DIR/mono.en (the English text), OUTPUT_DIR/reverse (the reverse run),
# OUTPUT_DIR/bt.{de,en} and bt.de.origin.json (the synthetic corpus), OUTPUT_DIR/corpus (the
# forward corpus and vocabularies), OUTPUT_DIR/MEMBER (each run), OUTPUT_DIR/val.tsv,
# OUTPUT_DIR/test.hyp, OUTPUT_DIR/test.txt, OUTPUT_DIR/summary.txt and a .out log per step.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/get_multi30k.sh --mono
scripts/build.sh nmt
source scripts/lib/members.sh
source scripts/lib/captions.sh
name=mono

out="${1:-models/multi30k_mono}"
budget="${MONO_MINUTES:-120}"
reverse_minutes="${MONO_REVERSE_MINUTES:-22}"
real_weight="${MONO_REAL_WEIGHT:-2}"
mono_lines="${MONO_LINES:-all}"
bt_search="${MONO_BT:-sample}"
tag="${MONO_TAG:-yes}"
precision="${MONO_PRECISION:-fp32}"
subword_alpha="${MONO_SUBWORD_ALPHA:-0}"
number='^[0-9]+([.][0-9]+)?$'
for setting in "MONO_MINUTES=$budget" "MONO_REVERSE_MINUTES=$reverse_minutes" "MONO_REAL_WEIGHT=$real_weight"; do
  [[ ${setting#*=} =~ $number ]] || { echo "mono: ${setting%%=*} must be a number, not '${setting#*=}'" >&2; exit 2; }
done
[[ $mono_lines == all || $mono_lines =~ ^[1-9][0-9]*$ ]] || { echo "mono: MONO_LINES must be a count or all, not '$mono_lines'" >&2; exit 2; }
bt_options=$(back_translation_options "$bt_search") ||
  { echo "mono: MONO_BT must be sample, beam or beam-noise, not '$bt_search'" >&2; exit 2; }
readarray -t bt_options <<< "$bt_options"
case $tag in
  yes) tags=(--train-tags ",<bt>") ;;
  no) tags=() ;;
  *) echo "mono: MONO_TAG must be yes or no, not '$tag'" >&2; exit 2 ;;
esac
[[ $precision == fp32 || $precision == bf16 ]] || { echo "mono: MONO_PRECISION must be fp32 or bf16, not '$precision'" >&2; exit 2; }
[[ $subword_alpha =~ ^(0|0?[.][0-9]+|1)$ ]] || { echo "mono: MONO_SUBWORD_ALPHA must be a number in [0, 1], not '$subword_alpha'" >&2; exit 2; }
# What step 5 needs after training stops: each member's last validation and checkpoint, the
# averages, and five dev translations (the last by the ensemble).
reserve_minutes=2
m30k=data/multi30k
sizes=(--embedding-size 384 --encoder-hidden-size 384 --decoder-hidden-size 384 --attention-size 384)
vocab=(--joint-vocab false --vocab-size 8000)

mkdir -p "$out"
rm -f "$out/summary.txt" "$out/test.txt" "$out/test.hyp"   # no result of an earlier run looks current
start=$(date +%s)
minutes_left() { awk -v s="$start" -v n="$(date +%s)" -v b="$budget" 'BEGIN { printf "%.2f", b - (n - s) / 60 }'; }
log() { echo "mono: $(date +%H:%M:%S) $*"; }

# 1. The English captions of task 2 that task 1 does not hold, each once, in their first order.
log "monolingual English from data/multi30k/task2"
task2_captions en > "$out/mono.en.part"
if [[ $mono_lines != all ]]; then
  head -n "$mono_lines" "$out/mono.en.part" > "$out/mono.en.head" && mv "$out/mono.en.head" "$out/mono.en.part"
fi
mv "$out/mono.en.part" "$out/mono.en"
log "$(wc -l < "$out/mono.en") English lines"

# 2. The reverse model.
reverse="${MONO_REVERSE_MODEL:-$out/reverse}"
if [[ -n ${MONO_REVERSE_MODEL:-} ]]; then
  [[ -s $reverse/best.ckpt ]] || { echo "mono: MONO_REVERSE_MODEL=$reverse holds no best.ckpt" >&2; exit 2; }
  log "using the reverse model in $reverse"
else
  log "training the reverse model (English->German) for $reverse_minutes minutes on both cores"
  build/nmt train --config configs/multi30k_de_en.toml "${sizes[@]}" "${vocab[@]}" --attention additive \
    --train-source $m30k/train.en --train-target $m30k/train.de --dev-source $m30k/val.en --dev-target $m30k/val.de \
    --model-dir "$out/reverse" --overwrite --threads 2 --max-minutes "$reverse_minutes" \
    --early-stopping-patience 0 --precision "$precision" > "$out/reverse.out" 2>&1 ||
    { tail -5 "$out/reverse.out"; exit 1; }
fi

# 3. Back-translation.
log "back-translating $out/mono.en (${bt_options[*]}, int8)"
build/nmt synthesize --model "$reverse" --input "$out/mono.en" "${bt_options[@]}" --seed 1 \
  --compute-type int8 --threads 2 --quiet --source-output "$out/bt.de" --target-output "$out/bt.en" \
  > "$out/synthesize.out" 2>&1 || { tail -5 "$out/synthesize.out"; exit 1; }
tail -1 "$out/synthesize.out"

# 4. The forward members on the real and the synthetic corpus.
corpora=(--train-source "$m30k/train.de,$out/bt.de" --train-target "$m30k/train.en,$out/bt.en"
  --train-weights "$real_weight,1" "${tags[@]}" --corpus-dir "$out/corpus")
log "preparing the forward corpus in $out/corpus"
build/nmt prepare --config configs/multi30k_de_en.toml "${vocab[@]}" "${corpora[@]}" --model-dir "$out/corpus" \
  > "$out/prepare.out" 2>&1 || { cat "$out/prepare.out"; exit 1; }
train_minutes=$(awk -v l="$(minutes_left)" -v r="$reserve_minutes" 'BEGIN { printf "%.2f", l - r }')
if awk -v t="$train_minutes" 'BEGIN { exit !(t < 1) }'; then
  echo "mono: only $train_minutes minutes of training would be left of MONO_MINUTES=$budget; give it more" >&2
  exit 2
fi
log "training ${members[*]} side by side, $train_minutes minutes each"
train_members "$train_minutes" --config configs/multi30k_de_en.toml "${sizes[@]}" "${vocab[@]}" "${corpora[@]}" \
  --precision "$precision" --subword-alpha "$subword_alpha"

# 5. The choice on val.
choose_on_val
used=$(awk -v l="$(minutes_left)" -v b="$budget" 'BEGIN { printf "%.1f", b - l }')
log "chosen on val after $used minutes: ${system[*]}"
column -t -s $'\t' "$out/val.tsv" 2>/dev/null || cat "$out/val.tsv"

test_once
{
  echo "wall-clock of steps 1-5: $used minutes (budget $budget)"
  echo "reverse model: $reverse$([[ -s $out/reverse.out ]] && grep -o 'best dev bleu [0-9.]*' "$out/reverse.out" | tail -1 | awk '{ print ", dev BLEU " $4 " (val, greedy)" }')"
  echo "synthetic corpus: $(python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); print(o["pairs"], "pairs")' "$out/bt.de.origin.json")"
  echo "system: ${system[*]}"
  cat "$out/val.tsv"
  echo "test_2016_flickr, ${search[*]}:"
  cat "$out/test.txt"
} > "$out/summary.txt.tmp"
mv "$out/summary.txt.tmp" "$out/summary.txt"
