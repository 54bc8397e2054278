#!/usr/bin/env bash
# The GPU benchmark: our training and search against a PyTorch reference of the same model
# (scripts/bench/gpu_reference.py: cuDNN's GRU for the encoder, a Python loop over GRUCell for the
# decoder), eager and under torch.compile (mode reduce-overhead: CUDA graphs), side by side in one
# run on one GPU. Prints one Markdown table, BLEU lines and versions.
#   1. the recipe trained on the GPU in fp32 and in bf16, side by side (two processes on the one GPU:
#      their times are not speeds), for NMT_GPU_STEPS updates (default 2000; 0: the whole recipe, to
#      its early stop);
#   2. training speed at the recipe's batch (2000 tokens) and at 8000 tokens: ours in fp32 and bf16
#      (the recipe's decoder on its own loop and on the recorded pass, NMT_GPU_DECODER_PASS), the
#      reference's (fp32), eager and compiled;
#   3. test_2016_flickr translated greedy and with beam 5 (batch 64): ours and the reference's with
#      the same weights, and the BLEU of both (the same model: the two should score alike), and of
#      the bf16-trained model.
# With --attention LIST (of additive, dot, general, cosine, comma-separated), only part 2 at the
# recipe's batch, for each scorer in LIST: the recipe with that scorer, ours against the reference
# of the same model.
# Usage: scripts/bench/gpu.sh [--attention LIST]   (a CUDA build: scripts/libtorch2.sh; the corpus:
#        scripts/get_multi30k.sh; python3 with torch and sentencepiece: pip install torch sentencepiece)
# Environment: NMT_BUILD_DIR (default build-libtorch), NMT_BENCH_STEPS (timed updates, default 200),
# NMT_GPU_STEPS, NMT_GPU_MODELS (where the trained models go, default models).
set -euo pipefail
scorers=""
while [ $# -gt 0 ]; do
  case "$1" in
    --attention)
      [ $# -ge 2 ] && [ -n "${2//,/}" ] ||
        { echo "gpu bench: --attention needs a list, such as additive,dot,general,cosine" >&2; exit 2; }
      scorers="$2"
      shift 2
      ;;
    *) echo "gpu bench: unknown argument $1 (usage: scripts/bench/gpu.sh [--attention LIST])" >&2; exit 2 ;;
  esac
done
for scorer in ${scorers//,/ }; do
  case "$scorer" in
    additive | dot | general | cosine) ;;
    *) echo "gpu bench: --attention: no reference for $scorer (additive, dot, general or cosine)" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
build="${NMT_BUILD_DIR:-$root/build-libtorch}"
steps="${NMT_BENCH_STEPS:-200}"
updates="${NMT_GPU_STEPS:-2000}"
model="${NMT_GPU_MODELS:-$root/models}/gpu-bench"
config=configs/multi30k_de_en.toml
test_source=data/multi30k/test_2016_flickr.de
reference="python3 $root/scripts/bench/gpu_reference.py"

for binary in nmt nmt_bench; do
  [ -x "$build/$binary" ] || { echo "gpu bench: $build/$binary not found: build the CUDA variant (scripts/libtorch2.sh)" >&2; exit 1; }
done
[ -s "$test_source" ] || { echo "gpu bench: $test_source not found: run scripts/get_multi30k.sh" >&2; exit 1; }
python3 -c "import torch, sentencepiece; assert torch.cuda.is_available()" ||
  { echo "gpu bench: python3 needs torch with CUDA and sentencepiece (pip install torch sentencepiece)" >&2; exit 1; }
nvidia-smi -L
mkdir -p "$(dirname "$model")"
table_head() {
  echo "| what | setting | sentences/s | target tokens/s | FLOP per target token | GFLOP/s | % of mm | peak RSS |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
}
# One row: the last line of command "$@" with "$1" put into its setting, or a row saying it failed
# (and the command's last lines on standard error), so that one failure loses no other row.
row() {
  local label=$1 output
  shift
  if output=$("$@" 2>&1); then
    echo "$output" | tail -1 | sed "s/, GPU |/, GPU$label |/"
  else
    echo "| failed: $* | | | | | | | |"
    echo "$output" | tail -3 >&2
  fi
}
# Training speed at $1 tokens a batch, $2 timed updates, with the scorer $3: ours in fp32 and bf16,
# the reference eager and compiled. The reference needs a joint vocabulary: the recipe's, or one
# made here when no recipe has been trained yet.
training_speed() {
  local tokens=$1 timed=$2 scorer=$3 precision compile
  local ours=("$build/nmt_bench" --config "$config" train --device cuda --batch-tokens "$tokens" --bench-steps "$timed"
    --bench-warmup 20)
  for precision in fp32 bf16; do
    row ", $precision" "${ours[@]}" --precision "$precision" --attention "$scorer"
    # The recipe's decoder on the recorded pass every other decoder takes, instead of its own loop.
    if [ "$scorer" = additive ]; then
      row ", $precision, recorded pass" env NMT_GPU_DECODER_PASS=recorded "${ours[@]}" --precision "$precision"
    fi
  done
  for compile in "" --compile; do
    row "" $reference train --vocab "$vocab" --source data/multi30k/train.de --target data/multi30k/train.en \
      --batch-tokens "$tokens" --steps "$timed" --warmup 20 --device cuda --attention "$scorer" $compile
  done
}
vocab="$model/vocab.joint.model"
if [ -n "$scorers" ]; then
  if [ ! -s "$vocab" ]; then
    vocab="$(dirname "$model")/gpu-bench-vocab/vocab.joint.model"
    [ -s "$vocab" ] || "$build/nmt" prepare --config "$config" --model-dir "$(dirname "$vocab")" > /dev/null
  fi
  table_head
  for scorer in ${scorers//,/ }; do training_speed 2000 "$steps" "$scorer"; done
  python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version(), torch.cuda.get_device_name(0))"
  exit 0
fi

# Trains the recipe into $1 with precision $2; prints how it ended.
train_recipe() {
  local limit=()
  [ "$updates" -gt 0 ] && limit=(--max-steps "$updates" --early-stopping-patience 0)
  "$build/nmt" train --config "$config" --device cuda --precision "$2" --model-dir "$1" --overwrite \
    "${limit[@]}" > "$1.log" 2>&1 || { tail -3 "$1.log" >&2; return 1; }
  echo "$2: $(grep -E "done" "$1.log" | tail -1 | sed 's/^\[[^]]*\] \[info\] //')"
}
train_recipe "$model-bf16" bf16 > "$model-bf16.result" 2>&1 &
train_recipe "$model" fp32
wait $! || echo "gpu bench: training in bf16 failed ($model-bf16.log)" >&2
cat "$model-bf16.result"
table_head
for tokens in 2000 8000; do
  # One epoch has 125 batches of 8000 tokens.
  training_speed "$tokens" "$([ "$tokens" -gt 2000 ] && echo $((steps < 100 ? steps : 100)) || echo "$steps")" additive
done
for beam in 1 5; do
  "$build/nmt_bench" translate --model "$model" --input "$test_source" --beam-size "$beam" --batch-size 64 \
    --device cuda | tail -1
  # The same without CUDA graphs (src/util/cuda_graph.h), which greedy search uses.
  [ "$beam" = 1 ] && NMT_CUDA_GRAPHS=off "$build/nmt_bench" translate --model "$model" --input "$test_source" \
    --beam-size 1 --batch-size 64 --device cuda | tail -1 | sed "s/, GPU |/, GPU, no CUDA graphs |/"
  $reference translate --checkpoint "$model/best.ckpt" --input "$test_source" --output "$model/test.reference.beam$beam" \
    --beam-size "$beam" --batch-size 64 --device cuda | tail -1
done
if [ -f "$model-bf16/best.ckpt" ]; then
  "$build/nmt" translate --model "$model-bf16" --input "$test_source" --output "$model/test.bf16.beam5" \
    --device cuda --quiet
  echo "beam 5, trained in bf16: $("$build/nmt" evaluate --hyp "$model/test.bf16.beam5" \
    --ref data/multi30k/test_2016_flickr.en | head -1)"
fi
for beam in 1 5; do
  "$build/nmt" translate --model "$model" --input "$test_source" --output "$model/test.ours.beam$beam" \
    --beam-size "$beam" --device cuda --quiet
  for who in ours reference; do
    echo "beam $beam, $who: $("$build/nmt" evaluate --hyp "$model/test.$who.beam$beam" \
      --ref data/multi30k/test_2016_flickr.en | head -1)"
  done
  echo "beam $beam: $(paste -d '\n' "$model/test.ours.beam$beam" "$model/test.reference.beam$beam" |
    paste - - | awk -F'\t' '$1 != $2' | wc -l) of $(wc -l < "$test_source") lines differ"
done
python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version(), torch.cuda.get_device_name(0))"
