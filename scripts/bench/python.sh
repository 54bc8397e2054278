#!/usr/bin/env bash
# What the Python module costs on top of the C++: the same translation (the whole test_2016_flickr
# with beam 5, after a warm-up of 100 sentences, timed inside the process) through
# nmt.Translator.translate_batch (results turned into Python objects included) and through
# nmt_bench translate (the command's in-process rate), alternating, RUNS times each. Prints each
# run's sentences/s and the overhead of the medians. Not a test: CI times nothing.
#
# Usage: scripts/bench/python.sh [MODEL_DIR] [RUNS]     (default models/multi30k_de_en, 3 runs)
# Environment: NMT_BENCH_THREADS (default: all cores); NMT_PYTHON, the interpreter (default
# /usr/bin/python3 with the module of build/python; another one must have nmt installed).
# Needs a build (scripts/build.sh nmt_bench _nmt) and the corpus (scripts/get_multi30k.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
model="${1:-models/multi30k_de_en}"
runs="${2:-3}"
threads="${NMT_BENCH_THREADS:-0}"
python="${NMT_PYTHON:-/usr/bin/python3}"
input=data/multi30k/test_2016_flickr.de
[ -x build/nmt_bench ] || { echo "bench: build/nmt_bench not found; run scripts/build.sh nmt_bench _nmt" >&2; exit 1; }
[ -s "$input" ] || { echo "bench: $input not found; run scripts/get_multi30k.sh first" >&2; exit 1; }
[ -f "$model/best.ckpt" ] || { echo "bench: $model/best.ckpt not found: train the recipe first" >&2; exit 1; }
export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"

python_rate() {
  "$python" - "$model" "$input" "$threads" <<'PY'
import sys, time
import nmt
model, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(path, encoding="utf-8").read().splitlines()
translator = nmt.Translator(model, threads=threads)
translator.translate_batch(lines[:100], beam_size=5)
start = time.perf_counter()
results = translator.translate_batch(lines, beam_size=5)
print(f"{len(lines) / (time.perf_counter() - start):.1f}")
PY
}

command_rate() {
  build/nmt_bench translate --model "$model" --input "$input" --beam-size 5 --threads "$threads" |
    awk -F'|' '{ gsub(/ /, "", $4); print $4 }'
}

python_rates=() command_rates=()
for run in $(seq "$runs"); do
  command_rates+=("$(command_rate)")
  python_rates+=("$(python_rate)")
  echo "run $run: nmt_bench ${command_rates[-1]} sentences/s, Python ${python_rates[-1]} sentences/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
c=$(median "${command_rates[@]}") p=$(median "${python_rates[@]}")
awk -v c="$c" -v p="$p" 'BEGIN { printf "median: nmt_bench %.1f, Python %.1f sentences/s: the Python call costs %.1f%%\n", c, p, 100 * (1 - p / c) }'
echo "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, commit $(git rev-parse --short HEAD))"
