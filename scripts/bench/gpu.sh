#!/usr/bin/env bash
# The GPU benchmark: our training and search against a PyTorch reference of the same model
# (scripts/bench/gpu_reference.py: cuDNN's GRU for the encoder, a Python loop over GRUCell for the
# decoder), side by side in one run on one GPU. Prints one Markdown table and the versions.
#   1. training speed at the recipe's batch (2000 tokens) and at 8000 tokens, ours and the reference's;
#   2. the recipe trained on the GPU for NMT_GPU_MINUTES (default 2), for the translation rows;
#   3. test_2016_flickr translated greedy and with beam 5 (batch 64), ours and the reference's with
#      the same weights, and the BLEU of both (the same model: the two should score alike).
# Usage: scripts/bench/gpu.sh    (a CUDA build: scripts/libtorch2.sh; the corpus: scripts/get_multi30k.sh;
#        python3 with torch and sentencepiece: pip install torch sentencepiece)
# Environment: NMT_BUILD_DIR (default build-libtorch), NMT_BENCH_STEPS (timed updates, default 200),
# NMT_GPU_MINUTES, NMT_GPU_MODELS (where the trained model goes, default models).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
build="${NMT_BUILD_DIR:-$root/build-libtorch}"
steps="${NMT_BENCH_STEPS:-200}"
minutes="${NMT_GPU_MINUTES:-2}"
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

"$build/nmt" train --config "$config" --device cuda --model-dir "$model" --overwrite --max-minutes "$minutes" \
  --early-stopping-patience 0 > "$model.log" 2>&1 || { tail -5 "$model.log" >&2; exit 1; }
grep -E "validation|done" "$model.log" | tail -2 >&2

echo "| what | setting | sentences/s | target tokens/s | FLOP per target token | GFLOP/s | % of mm | peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for tokens in 2000 8000; do
  # One epoch has 125 batches of 8000 tokens.
  timed=$([ "$tokens" -gt 2000 ] && echo $((steps < 100 ? steps : 100)) || echo "$steps")
  "$build/nmt_bench" --config "$config" train --device cuda --batch-tokens "$tokens" --bench-steps "$timed" \
    --bench-warmup 20 | tail -1
  $reference train --vocab "$model/vocab.joint.model" --source data/multi30k/train.de --target data/multi30k/train.en \
    --batch-tokens "$tokens" --steps "$timed" --warmup 20 --device cuda | tail -1
done
for beam in 1 5; do
  "$build/nmt_bench" translate --model "$model" --input "$test_source" --beam-size "$beam" --batch-size 64 \
    --device cuda | tail -1
  $reference translate --checkpoint "$model/best.ckpt" --input "$test_source" --output "$model/test.reference.beam$beam" \
    --beam-size "$beam" --batch-size 64 --device cuda | tail -1
done
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
