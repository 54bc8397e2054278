#!/usr/bin/env bash
# Formats every C++ and CUDA file of src/ and tests/ with the tree's .clang-format (Google style, 120
# columns). `scripts/format.sh --check` changes nothing, reports every file out of style and fails;
# scripts/test.sh runs it that way.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mapfile -t files < <(find src tests -name '*.cpp' -o -name '*.h' -o -name '*.cu' | sort)
command -v clang-format > /dev/null || { echo "format: clang-format is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
if [[ "${1:-}" == "--check" ]]; then
  clang-format --dry-run --Werror "${files[@]}" ||
    { echo "C++ files are out of style: run scripts/format.sh to format them" >&2; exit 1; }
else
  clang-format -i "${files[@]}"
fi
