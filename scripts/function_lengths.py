#!/usr/bin/env python3
"""Checks that no function in src/ is longer than a limit: 100 lines from its signature's first
line to its closing brace, unless a number is given. Prints each longer one (length, file:line,
name) and exits 1 when there is any; a test of the suite (CTest's function_lengths) runs it.

A function is found as clang-format lays out the sources (scripts/format.sh): a definition at
namespace scope starts at column 0 and its body closes with a "}" alone at column 0. Functions
defined inside a class body are not counted.

Usage: scripts/function_lengths.py [LIMIT]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOT_A_SIGNATURE = re.compile(
    r"^(#|//|/\*|\*|namespace\b|class\b|struct\b|enum\b|union\b|using\b|extern\b|template\b|typedef\b|"
    r"static_assert\b|\}|$)")


def functions(text):
    """(name, first line, length) of each function defined at namespace scope in `text`."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i] or lines[i][0].isspace() or NOT_A_SIGNATURE.match(lines[i]):
            i += 1
            continue
        start = j = i  # a declaration or definition: find where it opens a body or ends
        while j < len(lines) and "{" not in re.sub(r"//.*", "", lines[j]) and not lines[j].rstrip().endswith(";"):
            j += 1
        signature = " ".join(lines[start:j + 1])
        if j == len(lines) or "{" not in lines[j] or "(" not in signature:
            i = j + 1
            continue
        if lines[j].count("{") == lines[j].count("}"):
            i = j + 1  # a body on one line
            continue
        end = j + 1
        while end < len(lines) and lines[end] != "}":
            end += 1
        name = re.search(r"([\w:~]+)\s*\(", signature)
        yield (name.group(1) if name else "?"), start + 1, end - start + 1
        i = end + 1


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    long = []
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix in (".cpp", ".h", ".cu"):
            for name, line, length in functions(path.read_text(encoding="utf-8")):
                if length > limit:
                    long.append((length, f"{path.relative_to(ROOT)}:{line}", name))
    for length, where, name in sorted(long, reverse=True):
        print(f"{length:5d} {where} {name}: over {limit} lines, split it")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
