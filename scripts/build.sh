#!/usr/bin/env bash
# Set-up (idempotent) and a Release build: every target, or the ones named.
# Usage: scripts/build.sh [TARGET...]    e.g. scripts/build.sh nmt nmt_tests
#   NMT_LIBTORCH    the CMake prefix of another LibTorch (default: Debian's 1.13), for example
#                   LibTorch 2.x with CUDA from scripts/get_libtorch.sh, or the one inside a
#                   PyTorch install: python3 -c "import torch; print(torch.utils.cmake_prefix_path)"
#   NMT_BUILD_DIR   the build directory (default build/, or build-libtorch/ with NMT_LIBTORCH)
#   NMT_BUILD_JOBS  parallel compile jobs (default 2)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
configure=(-DCMAKE_BUILD_TYPE=Release)
build="${NMT_BUILD_DIR:-$root/build}"
if [ -n "${NMT_LIBTORCH:-}" ]; then
  if [ ! -f "$NMT_LIBTORCH/Torch/TorchConfig.cmake" ]; then
    echo "build: NMT_LIBTORCH=$NMT_LIBTORCH has no Torch/TorchConfig.cmake: give LibTorch's CMake prefix" \
      "(share/cmake inside it; scripts/get_libtorch.sh prints one)" >&2
    exit 1
  fi
  build="${NMT_BUILD_DIR:-$root/build-libtorch}"
  # The CUDA toolkit's compiler, which a CUDA LibTorch's CMake files look for.
  if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
  configure+=("-DCMAKE_PREFIX_PATH=$NMT_LIBTORCH")
fi
log="$build.configure.log"
cmake -S "$root" -B "$build" "${configure[@]}" > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
targets=()
for target in "$@"; do targets+=(--target "$target"); done
# Two jobs: each LibTorch translation unit needs about 1 GB of memory.
cmake --build "$build" -j "${NMT_BUILD_JOBS:-2}" "${targets[@]}"
