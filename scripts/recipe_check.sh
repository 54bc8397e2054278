#!/usr/bin/env bash
# The Multi30k pipelines end to end at tiny budgets (one of scripts/check_all.sh's deep checks):
# scripts/multi30k_best.sh in 4 minutes; scripts/multi30k_mono.sh in 6, with a reverse model of
# half a minute and 300 captions; scripts/multi30k_distill.sh with that system as its teacher, 300
# training sources and a student of half a minute; scripts/multi30k_multilingual.sh with German to
# English and English to French for a minute and a half, German to French scored zero-shot and
# through English. Each must finish and write the summary it promises; the BLEU of models this
# young is not judged. Exits with 77 (skipped) when Multi30k
# cannot be fetched.
# Usage: scripts/recipe_check.sh [WORK_DIR]      (default: a temporary directory, removed after)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ $# -ge 1 ]]; then
  work=$1
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
if ! scripts/get_multi30k.sh --mono > "$work/get_multi30k.log" 2>&1; then
  echo "recipe_check: skipped: Multi30k could not be fetched ($(tail -1 "$work/get_multi30k.log"))"
  exit 77
fi
expect() {  # FILE PATTERN: FILE has a line matching PATTERN
  grep -qE "$2" "$1" || { echo "recipe_check: $1 has no line matching '$2':" >&2; cat "$1" >&2; exit 1; }
}

BEST_MINUTES=4 scripts/multi30k_best.sh "$work/best"
expect "$work/best/summary.txt" '^system: --model '
expect "$work/best/test.txt" 'BLEU = [0-9.]+'
expect "$work/best/test.txt" 'chrF2 = [0-9.]+'

MONO_MINUTES=6 MONO_REVERSE_MINUTES=0.5 MONO_LINES=300 scripts/multi30k_mono.sh "$work/mono"
expect "$work/mono/summary.txt" '^synthetic corpus: [1-9][0-9]* pairs'
expect "$work/mono/summary.txt" '^system: --model '
expect "$work/mono/test.txt" 'BLEU = [0-9.]+'

DISTILL_TEACHER="$(sed -n 's/^system: //p' "$work/mono/summary.txt")" DISTILL_BT="$work/mono/bt" \
  DISTILL_LINES=300 DISTILL_MINUTES=0.5 scripts/multi30k_distill.sh "$work/distill"
expect "$work/distill/summary.txt" '^test BLEU: teacher [0-9.]+, student [0-9.]+'
expect "$work/distill/summary.txt" '^whole-command seconds \(median of 3\): teacher [0-9.]+, student [0-9.]+, ratio [0-9.]+'
[[ $(grep -c . "$work/distill/times.tsv") == 7 ]] || { echo "recipe_check: $work/distill/times.tsv is not 6 timed runs" >&2; exit 1; }

MULTI_MINUTES=1.5 MULTI_ZERO_SHOT=de-fr scripts/multi30k_multilingual.sh de-en,en-fr "$work/multilingual"
for line in 'de-en	val	direct' 'en-fr	test_2016_flickr	direct' 'de-fr	val	zero-shot' 'de-fr	test_2016_flickr	pivot'; do
  expect "$work/multilingual/results.tsv" "^$line	[0-9.]+	[0-9.]+$"
done
echo "recipe_check: multi30k_best.sh, multi30k_mono.sh, multi30k_distill.sh and multi30k_multilingual.sh ran end to end"
