#!/usr/bin/env bash
# The Python module as users install it: a wheel built by pip from the repository and installed
# into a fresh virtual environment of $NMT_PYTHON (default: the python3 on PATH; build tools and
# numpy from PyPI), then the module's tests (tests/python; pytest, safetensors, prometheus_client
# and tensorboard from PyPI) against that installation, from outside the repository. Needs the
# main build's nmt (scripts/build.sh nmt), which the tests compare with.
# Exits 77, saying why, when PyPI cannot be reached.
# Usage: scripts/python_package.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${NMT_PYTHON:-python3}"
[ -x "$root/build/nmt" ] || { echo "python_package: $root/build/nmt not found; run scripts/build.sh nmt" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check -q)
if ! "${pip[@]}" download --no-deps -d "$work/probe" scikit-build-core > "$work/probe.log" 2>&1; then
  tail -n 3 "$work/probe.log"
  echo "python_package: PyPI cannot be reached from here, so the module was not installed with pip"
  exit 77
fi
# `pip install .` is `pip wheel .` and the wheel installed: here the two steps, so that the wheel a
# user would carry to another machine is the one installed and tested. CMake builds in
# build-wheel/, new each time, beside build/, with the main build's compiler (pip's CMake runs
# Ninja, which would pick g++ where Make picks c++): the same command lines relative to the source
# tree, so that ccache gives back what the main build compiled.
start=$SECONDS
rm -rf "$root/build-wheel"
cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$root/build/CMakeCache.txt" 2>/dev/null || true)"
[ -z "$cxx" ] || export CXX="$cxx"
"${pip[@]}" wheel --no-deps -w "$work/wheel" --config-settings=build-dir="$root/build-wheel" "$root"
echo "python_package: pip wheel . took $((SECONDS - start)) s: $(cd "$work/wheel" && ls)"
"${pip[@]}" install "$work"/wheel/nmt-*.whl pytest safetensors prometheus_client tensorboard
cd "$work"  # so that `import nmt` finds the installed package, nothing of the repository's
"$work/venv/bin/python" -c "import nmt, sys; print('python_package: nmt', nmt.__version__, 'from', nmt.__file__)"
NMT_BINARY="$root/build/nmt" NMT_SOURCE_DIR="$root" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python"
