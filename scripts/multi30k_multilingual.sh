#!/usr/bin/env bash
# One Multi30k model for the language pairs given: Multi30k captions the same images in Czech,
# German, English and French, line by line, so any two of them are a parallel corpus. The model
# trains for MULTI_MINUTES of wall-clock (on all cores, or MULTI_THREADS) with the recipe's settings
# (configs/multi30k_de_en.toml, one joint vocabulary), each pair's targets tagged with their
# language (train-languages) and each pair validated on its own val set (the best checkpoint by
# their mean BLEU); then each pair is scored on val and test_2016_flickr (beam 5, length penalty
# 0.6, sacreBLEU's BLEU and chrF2). Nothing is chosen on the test set. One pair trains a bilingual
# model with the same settings: the baseline at the same wall-clock.
#
#   scripts/multi30k_multilingual.sh de-en,fr-en,cs-en         many to one
#   scripts/multi30k_multilingual.sh en-de,en-fr,en-cs         one to many
#   scripts/multi30k_multilingual.sh fr-en                     a bilingual baseline
#   MULTI_ZERO_SHOT=de-fr scripts/multi30k_multilingual.sh de-en,en-de,fr-en,en-fr
#                                                              many to many, and German to French,
#                                                              never trained: zero-shot, and
#                                                              through English (pivoting)
#
# Usage: scripts/multi30k_multilingual.sh PAIRS [OUTPUT_DIR]    (default models/multi30k_PAIRS)
# Environment: MULTI_MINUTES (default 60), the training's wall-clock; MULTI_ZERO_SHOT, pairs to
# score that are not trained (comma-separated): each directly (the model asked for its target
# language) and, when the model translates the source into English and English into the target,
# through English; MULTI_VOCAB_SIZE (default 16000), the joint vocabulary's size;
# MULTI_TEMPERATURE (default 0), train-temperature (Multi30k's corpora are of one size, so their
# shares are equal without it); MULTI_SUBWORD_ALPHA (default 0), subword-alpha; MULTI_DATA
# (default data/multi30k), where the {train,val,test_2016_flickr}.LANGUAGE files are;
# MULTI_THREADS (default 0: all cores), the run's threads (1 to train two runs side by side at the
# same wall-clock); MULTI_OPTIONS, more nmt train options (the suite's tiny sizes).
# Writes OUTPUT_DIR/model (the run), OUTPUT_DIR/SET.SOURCE-TARGET.hyp (each translation),
# OUTPUT_DIR/results.tsv (pair, set, how, BLEU, chrF) and OUTPUT_DIR/train.out (the run's log).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
name=multilingual

pairs_list="${1:-}"
[[ -n $pairs_list ]] || { echo "$name: give the pairs to train, as de-en,fr-en,cs-en" >&2; exit 2; }
out="${2:-models/multi30k_${pairs_list//,/_}}"
minutes="${MULTI_MINUTES:-60}"
vocab_size="${MULTI_VOCAB_SIZE:-16000}"
temperature="${MULTI_TEMPERATURE:-0}"
subword_alpha="${MULTI_SUBWORD_ALPHA:-0}"
data="${MULTI_DATA:-data/multi30k}"
threads="${MULTI_THREADS:-0}"
read -r -a extra <<< "${MULTI_OPTIONS:-}"
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$name: MULTI_MINUTES must be a number of minutes, not '$minutes'" >&2; exit 2; }
[[ $threads =~ ^[0-9]+$ ]] || { echo "$name: MULTI_THREADS must be a thread count, not '$threads'" >&2; exit 2; }
[[ $vocab_size =~ ^[1-9][0-9]*$ ]] || { echo "$name: MULTI_VOCAB_SIZE must be a count, not '$vocab_size'" >&2; exit 2; }
[[ $temperature =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$name: MULTI_TEMPERATURE must be a number, not '$temperature'" >&2; exit 2; }
[[ $subword_alpha =~ ^(0|0?[.][0-9]+|1)$ ]] || { echo "$name: MULTI_SUBWORD_ALPHA must be a number in [0, 1], not '$subword_alpha'" >&2; exit 2; }

# The pairs as SOURCE TARGET words, each checked: two different codes of languages the data has.
# split_pairs LIST: sets `sources` and `targets`.
split_pairs() {
  local pair
  sources=() targets=()
  IFS=, read -r -a listed <<< "$1"
  for pair in "${listed[@]}"; do
    [[ $pair =~ ^[a-z]{2,3}-[a-z]{2,3}$ && ${pair%-*} != "${pair#*-}" ]] ||
      { echo "$name: '$pair' is not a pair of two languages such as de-en" >&2; exit 2; }
    sources+=("${pair%-*}")
    targets+=("${pair#*-}")
  done
}
split_pairs "${MULTI_ZERO_SHOT:-}"
zero_sources=("${sources[@]}") zero_targets=("${targets[@]}")
split_pairs "$pairs_list"

if [[ $data == data/multi30k ]]; then
  languages=$(printf "%s\n" "${sources[@]}" "${targets[@]}" "${zero_sources[@]}" "${zero_targets[@]}" | sort -u | paste -sd,)
  scripts/get_multi30k.sh --languages "$languages"
fi
[ -x build/nmt ] || scripts/build.sh nmt
for language in "${sources[@]}" "${targets[@]}" "${zero_sources[@]}" "${zero_targets[@]}"; do
  for set in train val test_2016_flickr; do
    [ -s "$data/$set.$language" ] || { echo "$name: $data/$set.$language not found" >&2; exit 2; }
  done
done

join() { local IFS=,; echo "$*"; }
train_source=() train_target=() dev_source=() dev_target=()
for i in "${!sources[@]}"; do
  train_source+=("$data/train.${sources[$i]}") train_target+=("$data/train.${targets[$i]}")
  dev_source+=("$data/val.${sources[$i]}") dev_target+=("$data/val.${targets[$i]}")
done
options=(--config configs/multi30k_de_en.toml --train-source "$(join "${train_source[@]}")"
  --train-target "$(join "${train_target[@]}")" --dev-source "$(join "${dev_source[@]}")"
  --dev-target "$(join "${dev_target[@]}")" --joint-vocab true --vocab-size "$vocab_size"
  --train-temperature "$temperature" --subword-alpha "$subword_alpha")
multilingual=0
if [[ ${#sources[@]} -gt 1 ]]; then  # a bilingual baseline is a model without language tokens
  multilingual=1
  options+=(--train-languages "$(join "${targets[@]}")")
fi

mkdir -p "$out"
rm -f "$out/results.tsv"
echo "$name: $(date +%H:%M:%S) training ${pairs_list} for $minutes minutes into $out/model"
build/nmt train "${options[@]}" --model-dir "$out/model" --overwrite --max-minutes "$minutes" \
  --early-stopping-patience 0 --threads "$threads" "${extra[@]}" > "$out/train.out" 2>&1 ||
  { tail -5 "$out/train.out" >&2; echo "$name: training failed, see $out/train.out" >&2; exit 1; }

search=(--beam-size 5 --length-penalty 0.6 --quiet --threads "$threads")
# language_option TARGET: the --target-language a multilingual model needs.
language_option() { if [[ $multilingual == 1 ]]; then echo "--target-language $1"; fi; }
# score SET SOURCE TARGET HOW SOURCE_FILE: evaluates the model's translation of SOURCE_FILE into
# TARGET against SET.TARGET and appends a line to results.tsv.
score() {
  local set=$1 source=$2 target=$3 how=$4 input=$5 result
  # shellcheck disable=SC2046
  result=$(build/nmt evaluate --model "$out/model" --src "$input" --ref "$data/$set.$target" \
    $(language_option "$target") "${search[@]}" --output "$out/$set.$source-$target.$how.hyp" --json) || exit 1
  python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print("%s\t%s\t%s\t%.2f\t%.2f" % (*sys.argv[2:5], r["bleu"], r["chrf"]))' \
    "$result" "$source-$target" "$set" "$how" >> "$out/results.tsv"
}
trained() {  # trained SOURCE TARGET: whether the model was trained on the pair
  local i
  for i in "${!sources[@]}"; do [[ ${sources[$i]} == "$1" && ${targets[$i]} == "$2" ]] && return 0; done
  return 1
}

printf "pair\tset\thow\tBLEU\tchrF2\n" > "$out/results.tsv"
for set in val test_2016_flickr; do
  for i in "${!sources[@]}"; do
    score "$set" "${sources[$i]}" "${targets[$i]}" direct "$data/$set.${sources[$i]}"
  done
  for i in "${!zero_sources[@]}"; do
    source=${zero_sources[$i]} target=${zero_targets[$i]}
    [[ $multilingual == 1 ]] || { echo "$name: MULTI_ZERO_SHOT needs a model of several pairs" >&2; exit 2; }
    score "$set" "$source" "$target" zero-shot "$data/$set.$source"
    if trained "$source" en && trained en "$target"; then
      pivot="$out/$set.$source-en.pivot"
      build/nmt translate --model "$out/model" --input "$data/$set.$source" --output "$pivot" --target-language en \
        "${search[@]}"
      score "$set" "$source" "$target" pivot "$pivot"
    fi
  done
done
echo "$name: $(date +%H:%M:%S) done; $out/results.tsv:"
column -t -s $'\t' "$out/results.tsv" 2>/dev/null || cat "$out/results.tsv"
