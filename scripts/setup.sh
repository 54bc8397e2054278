#!/usr/bin/env bash
# One-time set-up for a Debian 12 machine; idempotent.
#
#  1. Checks the Debian packages the build needs. Missing ones are installed when running as
#     root; otherwise the exact apt-get line is printed and the script stops.
#  2. Selects OpenBLAS (OpenMP) as libblas.so.3 (update-alternatives); as another user than root it
#     prints the command and stops.
#  3. Fetches Debian's sentencepiece source package and builds it as a static library against the
#     system protobuf (third_party/sentencepiece/install). Debian's own libsentencepiece embeds
#     a second protobuf and crashes any process that also links LibTorch.
#
# Usage: scripts/setup.sh            (from the repository root or anywhere)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
spm_dir="$root/third_party/sentencepiece"
spm_prefix="$spm_dir/install"

packages=(g++ cmake make libtorch-dev libopenblas0-openmp libcli11-dev libspdlog-dev catch2
          libprotobuf-dev protobuf-compiler libtcmalloc-minimal4 ccache nlohmann-json3-dev clang-format time
          zlib1g-dev clang libclang-rt-14-dev pkg-config libboost-dev libssl-dev libcpp-httplib-dev chromium chromium-driver
          libgloo-dev libicu-dev libxml2-dev pybind11-dev python3-dev python3-numpy python3-pytest python3-venv
          python3-prometheus-client nginx openssl curl)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -q
    # nginx is for a test (scripts/nginx_check.sh) that starts its own: its package must not start
    # and enable a daemon on port 80. A policy-rc.d that refuses for the install, unless one is there.
    policy=/usr/sbin/policy-rc.d
    made_policy=""
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
    fi
    status=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" || status=$?
    [ -z "$made_policy" ] || rm -f "$policy"
    [ "$status" -eq 0 ] || exit "$status"
  else
    echo "setup: missing Debian packages. Run as root:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# LibTorch must use the OpenMP build of OpenBLAS, not the reference BLAS (20x slower) nor the
# pthread build (its threads fight LibTorch's OpenMP threads): docs/building.md.
openblas_omp=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
current_blas="$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)"
if [ -e "$openblas_omp" ] && [ "$current_blas" != "$openblas_omp" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    update-alternatives --set libblas.so.3-x86_64-linux-gnu "$openblas_omp"
  else
    echo "setup: libblas.so.3 is $current_blas, not OpenBLAS (OpenMP). Run as root:" >&2
    echo "  update-alternatives --set libblas.so.3-x86_64-linux-gnu $openblas_omp" >&2
    exit 1
  fi
fi

if [ -f "$spm_prefix/lib/libsentencepiece.a" ] && [ -f "$spm_prefix/lib/libsentencepiece_train.a" ]; then
  exit 0
fi

echo "setup: building sentencepiece (static, system protobuf) into $spm_prefix"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A private sources list with deb-src enabled, so the machine's apt configuration is left alone.
sed 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources > "$work/src.sources"
apt_opts=(-o "Dir::Etc::SourceList=$work/src.sources" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o Debug::NoLocking=1)
mkdir -p "$work/lists/partial"
apt-get "${apt_opts[@]}" update -q >/dev/null
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only sentencepiece >/dev/null)
tarball="$(ls "$work"/sentencepiece_*.orig.tar.* | head -n 1)"
mkdir -p "$work/src"
tar -xf "$tarball" -C "$work/src" --strip-components=1
# Its compiler warnings are sentencepiece's own: kept in a log, shown only if the build fails.
log="$work/sentencepiece-build.log"
{ cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DSPM_USE_BUILTIN_PROTOBUF=OFF -DSPM_ENABLE_SHARED=OFF -DSPM_ENABLE_TCMALLOC=OFF \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$spm_prefix" &&
  cmake --build "$work/build" -j "$(nproc)" && cmake --install "$work/build"; } > "$log" 2>&1 ||
  { tail -n 40 "$log"; echo "setup: the sentencepiece build failed (above: the end of its log)" >&2; exit 1; }
echo "setup: sentencepiece installed in $spm_prefix"
