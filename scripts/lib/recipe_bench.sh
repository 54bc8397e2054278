# The set-up of the benchmarks that train the Multi30k recipe (scripts/bench/tensorboard.sh,
# scripts/bench/subword_sampling.sh), sourced by them after they set `config` and `threads`: checks
# that nmt is built and the corpus is there, makes the work directory `work` (removed on exit),
# prints the CPU and prepares the corpus once in $work/corpus, so that every run starts from it.
[ -x build/nmt ] || { echo "bench: build/nmt not found; run scripts/build.sh nmt" >&2; exit 1; }
[ -s data/multi30k/train.de ] || { echo "bench: data/multi30k not found; run scripts/get_multi30k.sh" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
build/nmt prepare --config "$config" --corpus-dir "$work/corpus" --model-dir "$work/unused" --threads "$threads" \
  > "$work/prepare.log" 2>&1 || { tail -5 "$work/prepare.log"; exit 1; }
