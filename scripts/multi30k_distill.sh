#!/usr/bin/env bash
# Sequence-level knowledge distillation (Kim and Rush 2016) on Multi30k German->English: a teacher
# (an ensemble, beam search) translates the training sources, a single student learns those
# translations beside the real ones, and the student's greedy search in int8 through a shortlist
# is set against the teacher's beam search on test_2016_flickr, in BLEU and in whole-command time.
#  1. the teacher's translations of data/multi30k/train.de (nmt synthesize --direction forward,
#     beam 5, length penalty 0.6), and with DISTILL_MONO=yes of task 2's German captions too (kept,
#     with OUTPUT_DIR/teacher.txt naming the teacher, its files and the sources, so that a rerun
#     with the same teacher and sources goes straight to step 2);
#  2. the student, on one thread for DISTILL_MINUTES, on the distilled corpus (weight
#     DISTILL_WEIGHT), the real one (weight DISTILL_REAL_WEIGHT) and the back-translated one
#     (DISTILL_BT, tagged <bt>): by default it starts from the teacher's first member
#     (DISTILL_INIT, fine-tuning at DISTILL_LEARNING_RATE), with DISTILL_INIT=none from scratch with
#     the recipe's sizes 384, separate 8k vocabularies and additive attention; then its shortlist;
#  3. on test_2016_flickr, alternately three times each: the teacher's beam 5 and the student's
#     greedy search in int8 through its shortlist, each a whole `nmt evaluate` on both cores; BLEU
#     and the median wall-clock of each, and their ratio; one such run at a time in this checkout
#     (a lock, models/.distill-timing.lock: a second run waits for the first's timings to end).
# The student is chosen on nothing but its own dev BLEU during training (best.ckpt); the test set
# is only scored.
#
# Usage: scripts/multi30k_distill.sh [OUTPUT_DIR]        (default models/multi30k_distill)
# Environment: DISTILL_TEACHER, the teacher as `nmt evaluate` model options (default: the system
# that scripts/multi30k_mono.sh chose, from models/multi30k_mono/summary.txt); DISTILL_MINUTES, the
# student's training (default 60); DISTILL_WEIGHT (default 2) and DISTILL_REAL_WEIGHT (default 1;
# 0 leaves the real corpus out); DISTILL_BT, the back-translated corpus as a path without its .de
# and .en (default models/multi30k_mono/bt; none: without); DISTILL_INIT, the checkpoint the
# student starts from (default: the teacher's first --checkpoint; none: from scratch);
# DISTILL_LEARNING_RATE (default 0.00025 when fine-tuning, the config's from scratch); DISTILL_MONO
# (yes or no, default no); DISTILL_LINES, how many source lines the teacher translates (default:
# all).
# Writes OUTPUT_DIR/distilled.{de,en} (and their origin), OUTPUT_DIR/student (the run and its
# shortlist.bin), OUTPUT_DIR/times.tsv, OUTPUT_DIR/summary.txt and a .out log per step.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/get_multi30k.sh --mono
scripts/build.sh nmt
source scripts/lib/captions.sh

out="${1:-models/multi30k_distill}"
minutes="${DISTILL_MINUTES:-60}"
weight="${DISTILL_WEIGHT:-2}"
real_weight="${DISTILL_REAL_WEIGHT:-1}"
bt="${DISTILL_BT:-models/multi30k_mono/bt}"
mono="${DISTILL_MONO:-no}"
lines="${DISTILL_LINES:-all}"
if [[ -n ${DISTILL_TEACHER:-} ]]; then
  read -r -a teacher <<< "$DISTILL_TEACHER"
else
  summary=models/multi30k_mono/summary.txt
  [[ -s $summary ]] || { echo "distill: no DISTILL_TEACHER and no $summary; run scripts/multi30k_mono.sh first" >&2; exit 2; }
  read -r -a teacher <<< "$(sed -n 's/^system: //p' "$summary")"
fi
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "distill: DISTILL_MINUTES must be a number, not '$minutes'" >&2; exit 2; }
[[ $weight =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v w="$weight" 'BEGIN { exit !(w > 0) }' ||
  { echo "distill: DISTILL_WEIGHT must be a number above 0, not '$weight'" >&2; exit 2; }
[[ $real_weight =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "distill: DISTILL_REAL_WEIGHT must be a number, not '$real_weight'" >&2; exit 2; }
if [[ $bt != none && ! ( -s $bt.de && -s $bt.en ) ]]; then
  echo "distill: DISTILL_BT names $bt.de and $bt.en, which are not both there; run scripts/multi30k_mono.sh or set DISTILL_BT=none" >&2
  exit 2
fi
init="${DISTILL_INIT:-}"
if [[ -z $init ]]; then  # the teacher's first --checkpoint
  for ((i = 0; i + 1 < ${#teacher[@]}; i++)); do
    [[ ${teacher[i]} == --checkpoint ]] && { init=${teacher[i + 1]}; break; }
  done
  [[ -n $init ]] || { echo "distill: the teacher names no --checkpoint to start the student from; set DISTILL_INIT (a checkpoint, or none)" >&2; exit 2; }
fi
[[ $init == none || -s $init ]] || { echo "distill: DISTILL_INIT names $init, which is not a checkpoint file; give one, or none" >&2; exit 2; }
learning_rate="${DISTILL_LEARNING_RATE:-}"
[[ -z $learning_rate && $init != none ]] && learning_rate=0.00025
[[ -z $learning_rate || $learning_rate =~ ^[0-9]+([.][0-9]+)?([eE]-?[0-9]+)?$ ]] ||
  { echo "distill: DISTILL_LEARNING_RATE must be a number, not '$learning_rate'" >&2; exit 2; }
[[ $lines == all || $lines =~ ^[1-9][0-9]*$ ]] || { echo "distill: DISTILL_LINES must be a count or all, not '$lines'" >&2; exit 2; }
[[ $mono == yes || $mono == no ]] || { echo "distill: DISTILL_MONO must be yes or no, not '$mono'" >&2; exit 2; }
m30k=data/multi30k
beam=(--beam-size 5 --length-penalty 0.6)
mkdir -p "$out"
rm -f "$out/summary.txt" "$out/times.tsv"
log() { echo "distill: $(date +%H:%M:%S) $*"; }

# 1. The teacher's translations, unless this teacher already translated these sources here.
cat $m30k/train.de > "$out/sources.de.part"
if [[ $mono == yes ]]; then
  task2_captions de >> "$out/sources.de.part"
fi
if [[ $lines != all ]]; then
  head -n "$lines" "$out/sources.de.part" > "$out/sources.de.head" && mv "$out/sources.de.head" "$out/sources.de.part"
fi
mv "$out/sources.de.part" "$out/sources.de"
made_by="${teacher[*]} ${beam[*]}; sources $(md5sum < "$out/sources.de" | cut -d' ' -f1)"
for option in "${teacher[@]}"; do  # the teacher's files as they are now
  [[ -e $option ]] && made_by+="; $option $(stat -c '%s %Y' "$option")"
done
if [[ -s $out/distilled.en && -s $out/teacher.txt && $(< "$out/teacher.txt") == "$made_by" ]]; then
  log "the teacher's translations of $out/sources.de are there ($out/teacher.txt says by whom); not made again"
else
  rm -f "$out/teacher.txt"
  log "the teacher (${teacher[*]}) translates $(wc -l < "$out/sources.de") German sentences, ${beam[*]}"
  build/nmt synthesize "${teacher[@]}" --direction forward --input "$out/sources.de" "${beam[@]}" --threads 2 \
    --quiet --source-output "$out/distilled.de" --target-output "$out/distilled.en" > "$out/synthesize.out" 2>&1 ||
    { tail -5 "$out/synthesize.out"; exit 1; }
  echo "$made_by" > "$out/teacher.txt"
fi

# 2. The student.
sources=("$out/distilled.de") targets=("$out/distilled.en") weights=("$weight") tags=("")
if awk -v w="$real_weight" 'BEGIN { exit !(w > 0) }'; then
  sources+=("$m30k/train.de") targets+=("$m30k/train.en") weights+=("$real_weight") tags+=("")
fi
if [[ $bt != none ]]; then
  sources+=("$bt.de") targets+=("$bt.en") weights+=(1) tags+=("<bt>")
fi
join() { local IFS=,; echo "$*"; }
student_options=(--train-source "$(join "${sources[@]}")" --train-target "$(join "${targets[@]}")"
  --train-weights "$(join "${weights[@]}")" --train-tags "$(join "${tags[@]}")")
if [[ $init == none ]]; then
  student_options+=(--config configs/multi30k_de_en.toml --joint-vocab false --vocab-size 8000 --embedding-size 384
    --encoder-hidden-size 384 --decoder-hidden-size 384 --attention-size 384)
else  # the member's own configuration, so that the shapes are the checkpoint's
  student_options+=(--config "$(dirname "$init")/config.toml" --init-from "$init" --corpus-dir "")
fi
[[ -z $learning_rate ]] || student_options+=(--learning-rate "$learning_rate")
log "training the student for $minutes minutes (from ${init/#none/scratch}) on ${sources[*]}, weights ${weights[*]}"
build/nmt train "${student_options[@]}" --model-dir "$out/student" --overwrite --threads 1 \
  --max-minutes "$minutes" --early-stopping-patience 0 > "$out/student.out" 2>&1 ||
  { tail -5 "$out/student.out"; exit 1; }
build/nmt shortlist --model "$out/student" > "$out/shortlist.out" 2>&1 || { tail -5 "$out/shortlist.out"; exit 1; }

# 3. Teacher against student on test, alternately.
test=(--src $m30k/test_2016_flickr.de --ref $m30k/test_2016_flickr.en --json --quiet --threads 2)
student=(--model "$out/student" --beam-size 1 --compute-type int8 --shortlist "$out/student/shortlist.bin")
printf "system\trun\tseconds\tBLEU\n" > "$out/times.tsv"
run() {  # name, run number, evaluate options
  local name=$1 number=$2 begin end result
  shift 2
  begin=$(date +%s.%N)
  result=$(build/nmt evaluate "$@" "${test[@]}")
  end=$(date +%s.%N)
  printf "%s\t%s\t%.2f\t%s\n" "$name" "$number" "$(awk -v a="$begin" -v b="$end" 'BEGIN { print b - a }')" \
    "$(python3 -c 'import json, sys; print("%.2f" % json.loads(sys.argv[1])["bleu"])' "$result")" >> "$out/times.tsv"
}
# Two runs of this script that reach this step together would time each other (each command uses
# both cores): one times at a time, the other waits here.
mkdir -p models
exec {timing_lock}> models/.distill-timing.lock
flock "$timing_lock"
log "test_2016_flickr: teacher ${beam[*]} against student greedy, int8, shortlist; three runs each"
for number in 1 2 3; do
  run teacher "$number" "${teacher[@]}" "${beam[@]}"
  run student "$number" "${student[@]}"
done
exec {timing_lock}>&-
median() { awk -F'\t' -v s="$1" '$1 == s { print $3 }' "$out/times.tsv" | sort -n | sed -n 2p; }
bleu() { awk -F'\t' -v s="$1" '$1 == s { print $4; exit }' "$out/times.tsv"; }
{
  echo "teacher: ${teacher[*]} ${beam[*]}"
  echo "student: ${student[*]} (dev BLEU of its best checkpoint, greedy: $(grep -o 'best dev bleu [0-9.]*' "$out/student.out" | tail -1 | awk '{ print $4 }'))"
  echo "student corpora: ${sources[*]}, weights ${weights[*]}, from ${init/#none/scratch}"
  echo "distilled pairs: $(wc -l < "$out/distilled.en")"
  printf "test BLEU: teacher %s, student %s\n" "$(bleu teacher)" "$(bleu student)"
  printf "whole-command seconds (median of 3): teacher %s, student %s, ratio %.2f\n" "$(median teacher)" \
    "$(median student)" "$(awk -v t="$(median teacher)" -v s="$(median student)" 'BEGIN { print t / s }')"
} > "$out/summary.txt.tmp"
mv "$out/summary.txt.tmp" "$out/summary.txt"
cat "$out/summary.txt"
