#!/usr/bin/env bash
# What monolingual text buys on Multi30k German->English: tagged against untagged
# back-translation, sampling against beam search (and beam search with noise), self-training, and
# the share of real data (2:1 and 1:1), each a member of scripts/multi30k_mono.sh (sizes 384,
# separate 8k vocabularies, additive attention) trained for STUDY_STEPS updates on one thread, side
# by side in pairs (scripts/study/mono.txt), then scored on val and test (scripts/study/report.py).
#  1. From MONO_DIR (a finished scripts/multi30k_mono.sh run: its reverse model and English
#     captions), in int8 on both cores: sample (top-10 sampling, as that script) and beam (beam 5,
#     length penalty 0.6);
#  2. real-only, the member on the real corpus alone, beside sample-tagged;
#  3. forward, for self-training (He et al. 2020): real-only's best checkpoint translates task 2's
#     German captions (beam 5, int8), their German sides noised as beam-noise's below;
#  4. sample-untagged beside beam-untagged;
#  5. beam-noise: beam's pairs with noise on the German side (each word deleted or replaced by
#     <blank> with probability 0.1, the words shuffled by up to 3 places, as Edunov et al. 2018),
#     by `synthesize --translations`: the same bytes as translating again, without the search;
#  6. the other two beside each other, then real-1-sample-tagged;
#  7. the report, STUDY_DIR/report.md.
# Each step whose output is there is skipped, and a run cut short goes on from its last checkpoint,
# so that a study cut short goes on where it stopped.
#
# Usage: scripts/study/mono.sh [MONO_DIR]          (default models/multi30k_mono)
# Environment: STUDY_DIR (default models/study_mono), STUDY_STEPS (default 8000, about an hour of
# one thread of a 2-core Xeon with a second run beside it; the members of multi30k_mono.sh train
# some 12,700).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source scripts/lib/captions.sh
mono="${1:-models/multi30k_mono}"
export STUDY_DIR="${STUDY_DIR:-models/study_mono}" STUDY_STEPS="${STUDY_STEPS:-8000}" STUDY_JOBS=2 STUDY_THREADS=1
[[ -s $mono/reverse/best.ckpt && -s $mono/mono.en ]] ||
  { echo "study: $mono holds no reverse/best.ckpt and mono.en; run scripts/multi30k_mono.sh first" >&2; exit 2; }
[[ -x build/nmt ]] || { echo "study: build/nmt not found; run scripts/build.sh first" >&2; exit 1; }
corpora="$STUDY_DIR/corpora"
mkdir -p "$corpora"
log() { echo "study: $(date +%H:%M:%S) $*"; }
readarray -t noise < <(back_translation_options noise)
readarray -t beam_noise < <(back_translation_options beam-noise)
nmt=build/nmt  # then scripts/study/run.sh's copy, which a rebuild leaves alone

synthesize() {  # NAME SYNTHESIZE_OPTIONS...: $corpora/NAME.{de,en}, unless there
  local name=$1
  shift
  [[ -s $corpora/$name.de.origin.json ]] && return 0
  log "synthetic corpus $name: $*"
  "$nmt" synthesize "$@" --seed 1 --quiet \
    --source-output "$corpora/$name.de" --target-output "$corpora/$name.en" > "$corpora/$name.out" 2>&1 ||
    { tail -5 "$corpora/$name.out"; exit 1; }
}
variants="$STUDY_DIR/variants.txt"
member="--embedding-size 384 --encoder-hidden-size 384 --decoder-hidden-size 384 --attention-size 384"
member+=" --joint-vocab false --vocab-size 8000 --attention additive --early-stopping-patience 0"
sed -e "s|@MEMBER@|$member|" -e "s|@CORPORA@|$corpora|g" scripts/study/mono.txt > "$variants"

# 1. Back-translation two ways.
reverse=(--model "$mono/reverse" --input "$mono/mono.en" --compute-type int8 --threads 2)
for way in sample beam; do
  readarray -t options < <(back_translation_options $way)
  synthesize $way "${reverse[@]}" "${options[@]}"
done
# 2. The member on real data alone, beside the first on synthetic data.
scripts/study/run.sh <(grep -E '^(real-only|sample-tagged) ' "$variants")
nmt="$STUDY_DIR/nmt"
# 3. Self-training's corpus.
[[ -s $corpora/captions.de ]] || { task2_captions de > "$corpora/captions.de.part" && mv "$corpora/captions.de.part" "$corpora/captions.de"; }
synthesize forward --direction forward --model "$STUDY_DIR/real-only" --input "$corpora/captions.de" \
  --compute-type int8 --threads 2 \
  "${beam_noise[@]}"
# 4. Sampling beside beam search.
scripts/study/run.sh <(grep -E '^(sample-untagged|beam-untagged) ' "$variants")
# 5. Beam search with noise, from beam's pairs.
synthesize beam-noise --translations "$corpora/beam.de" --input "$corpora/beam.en" "${noise[@]}"
# 6. The rest, two at a time.
scripts/study/run.sh "$variants"
# 7. The report.
log "scoring every run on val and test"
scripts/study/report.py "$STUDY_DIR" $(grep -v '^#' "$variants" | awk '{ print $1 }') > "$STUDY_DIR/report.md.part"
mv "$STUDY_DIR/report.md.part" "$STUDY_DIR/report.md"
cat "$STUDY_DIR/report.md"
