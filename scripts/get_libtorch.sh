#!/usr/bin/env bash
# Fetches LibTorch 2.x from PyPI (the C++ library inside the torch wheel) into a cache, once, and
# prints its CMake prefix for scripts/build.sh:
#
#   NMT_LIBTORCH="$(scripts/get_libtorch.sh)" scripts/build.sh
#
# With the CUDA toolkit (nvcc on PATH, or under /usr/local/cuda) it is PyPI's CUDA 13 build; the
# toolkit's runtime and cuBLAS serve it, so of the wheel's nvidia-* dependencies only those the
# toolkit lacks are fetched: cuSPARSELt, NVSHMEM, cuFile, and cuDNN and NCCL unless installed. Without the toolkit, or
# with --cpu, it is the CPU-only build from download.pytorch.org. Python's torch module is not
# installed: only its files are unpacked.
#
# Usage: scripts/get_libtorch.sh [--cpu]
#   NMT_TORCH_VERSION  the torch version (default 2.11.0)
#   NMT_CACHE          where it is kept (default ~/.cache/nmt): torch-VERSION-cuda or -cpu
set -euo pipefail

version="${NMT_TORCH_VERSION:-2.11.0}"
cache="${NMT_CACHE:-$HOME/.cache/nmt}"
variant=cuda
if [ "${1:-}" = "--cpu" ]; then
  variant=cpu
elif [ -n "${1:-}" ]; then
  echo "get_libtorch: unknown argument '$1' (usage: scripts/get_libtorch.sh [--cpu])" >&2
  exit 2
elif ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "get_libtorch: no CUDA toolkit (nvcc): fetching the CPU-only LibTorch" >&2
  variant=cpu
fi
target="$cache/torch-$version-$variant"
prefix="$target/torch/share/cmake"

if [ ! -f "$target/.complete" ]; then
  python="$(command -v python3 || true)"
  if [ -z "$python" ] || ! "$python" -m pip --version > /dev/null 2>&1; then
    echo "get_libtorch: needs python3 with pip to fetch the wheel (apt-get install python3-pip)" >&2
    exit 1
  fi
  rm -rf "$target"
  mkdir -p "$cache"
  echo "get_libtorch: fetching torch $version ($variant) into $target" >&2
  if [ "$variant" = cpu ]; then
    packages=("torch==$version+cpu")
    index=(--index-url https://download.pytorch.org/whl/cpu)
  else
    # torch's own pins for CUDA 13 (its METADATA): the libraries the toolkit does not carry.
    packages=("torch==$version" nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 "nvidia-cufile==1.15.1.6.*")
    # cuDNN and NCCL are not part of every toolkit install.
    libraries="$(ldconfig -p 2>/dev/null || true)"
    grep -q "libcudnn.so.9 " <<< "$libraries" || packages+=(nvidia-cudnn-cu13==9.19.0.56)
    grep -q "libnccl.so.2 " <<< "$libraries" || packages+=(nvidia-nccl-cu13==2.28.9)
    index=()
  fi
  # --no-deps: the C++ library needs none of the Python packages; a half-done fetch leaves no
  # .complete, so the next run starts again.
  if ! "$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$target" "${index[@]}" "${packages[@]}" >&2; then
    echo "get_libtorch: pip could not fetch ${packages[*]}${index:+ from ${index[1]}}: check the network" \
      "(the CPU-only build needs download.pytorch.org, the CUDA build only PyPI)" >&2
    exit 1
  fi
  if [ ! -f "$prefix/Torch/TorchConfig.cmake" ]; then
    echo "get_libtorch: $target has no torch/share/cmake/Torch/TorchConfig.cmake after the install" >&2
    exit 1
  fi
  touch "$target/.complete"
fi
echo "$prefix"
