#!/usr/bin/env python3
"""Generates src/eval/lowercase_tables.inc, the tables behind src/eval/lowercase.cpp.

sacreBLEU lowercases with Python's str.lower() (sacrebleu/metrics/bleu.py,
BLEU._preprocess_segment), so `nmt evaluate --lowercase` reproduces it in C++ from three tables,
all found by probing str.lower() on every code point (U+0000..U+10FFFF) rather than by reading
the Unicode data files, so that they say what CPython does:

  kLowercaseRanges      code points whose lowercase is one, different code point, as runs
                        {first, last, delta, stride}; U+0130 (lowercase: two code points) is
                        handled in code.
  kCaseIgnorableRanges  Case_Ignorable as CPython's _PyUnicode_IsCaseIgnorable sees it, and
  kCasedRanges          Cased as _PyUnicode_IsCased sees it (for characters that are not
                        case-ignorable): both decide whether a capital sigma lowercases to the
                        final form (Objects/unicodeobject.c, handle_capital_sigma), which is how
                        they are probed.

Generated with CPython 3.11.7 (Unicode 14.0.0); the output names the Python and Unicode versions
it came from. Another Python version gives the tables of its own Unicode version. The layout is
what clang-format 14 makes of them with the tree's .clang-format.

Usage (from anywhere):
    python3 scripts/gen_lowercase_tables.py            # writes src/eval/lowercase_tables.inc
    python3 scripts/gen_lowercase_tables.py --check    # exits 1 when that file differs
    python3 scripts/gen_lowercase_tables.py --output -  # prints the tables
"""
import argparse
import pathlib
import platform
import sys
import unicodedata

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "src" / "eval" / "lowercase_tables.inc"
COLUMN_LIMIT = 120  # .clang-format
INDENT = "    "  # clang-format's continuation indent inside a braced initializer
CAPITAL_SIGMA = "\u03a3"
FINAL_SIGMA = "\u03c2"
CODE_POINTS = range(0x110000)


def single_lowercase(code_point):
    """The code point str.lower() maps code_point to, or None when unchanged or several."""
    lowered = chr(code_point).lower()
    if len(lowered) != 1 or lowered == chr(code_point):
        return None
    return ord(lowered)


def lowercase_ranges():
    """Runs of code points with the same delta, every one (stride 1) or every other one (2)."""
    mapped = [(c, lower - c) for c in CODE_POINTS if (lower := single_lowercase(c)) is not None]
    ranges = []
    index = 0
    while index < len(mapped):
        first, delta = mapped[index]
        stride = 1
        if index + 1 < len(mapped):
            following, following_delta = mapped[index + 1]
            if following_delta == delta and following - first in (1, 2):
                stride = following - first
        last = first
        while index + 1 < len(mapped) and mapped[index + 1] == (last + stride, delta):
            index += 1
            last += stride
        ranges.append((first, last, delta, stride))
        index += 1
    return ranges


def final_sigma_after(prefix):
    return (prefix + CAPITAL_SIGMA).lower()[-1] == FINAL_SIGMA


def sigma_properties():
    """(case-ignorable, cased) code points. A capital sigma after c alone is final exactly when c
    is cased and not case-ignorable; after a cased letter and c, exactly when c is case-ignorable
    or cased."""
    ignorable, cased = [], []
    for code_point in CODE_POINTS:
        character = chr(code_point)
        after_alone = final_sigma_after(character)
        after_letter = final_sigma_after("A" + character)
        if after_letter and not after_alone:
            ignorable.append(code_point)
        if after_alone:
            cased.append(code_point)
    return ignorable, cased


def runs(code_points):
    ranges = []
    for code_point in code_points:
        if ranges and ranges[-1][1] + 1 == code_point:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    return ranges


def braced(fields):
    return "{" + ", ".join(fields) + "},"


def table(declaration, entries):
    """A braced list laid out as clang-format lays out simple initializers: as many columns as
    fit in the column limit, each padded to the width of its widest entry."""
    items = [braced(entry) for entry in entries]
    widest = max(len(item) for item in items)
    columns = 1
    while len(INDENT) + (columns + 1) * (widest + 1) - 1 <= COLUMN_LIMIT:
        columns += 1
    widths = [max(len(item) for item in items[column::columns]) for column in range(columns)]
    lines = [declaration + " = {"]
    for start in range(0, len(items), columns):
        row = items[start : start + columns]
        padded = [item.ljust(widths[column]) for column, item in enumerate(row[:-1])] + [row[-1]]
        lines.append(INDENT + " ".join(padded))
    lines.append("};")
    return "\n".join(lines)


def hexadecimal(value):
    return "0x%X" % value


def generate():
    ignorable, cased = sigma_properties()
    lowercase = [
        (hexadecimal(first), hexadecimal(last), str(delta), str(stride))
        for first, last, delta, stride in lowercase_ranges()
    ]
    version = "CPython %s (Unicode %s)" % (platform.python_version(), unicodedata.unidata_version)
    parts = [
        "// Generated by scripts/gen_lowercase_tables.py from %s: do not edit." % version,
        "// Python str.lower()'s case mapping as tables, included by src/eval/lowercase.cpp.",
        "",
        "// Code points whose lowercase is a single, different code point (U+0130 is",
        "// the one multi-code-point case and is handled in code).",
        table("constexpr LowercaseRange kLowercaseRanges[]", lowercase),
        "",
        "// Unicode Case_Ignorable, as CPython's _PyUnicode_IsCaseIgnorable sees it.",
        table(
            "constexpr CodePointRange kCaseIgnorableRanges[]",
            [(hexadecimal(first), hexadecimal(last)) for first, last in runs(ignorable)],
        ),
        "",
        "// Unicode Cased, as CPython's _PyUnicode_IsCased sees it (only consulted for",
        "// characters that are not case-ignorable).",
        table(
            "constexpr CodePointRange kCasedRanges[]",
            [(hexadecimal(first), hexadecimal(last)) for first, last in runs(cased)],
        ),
    ]
    return "\n".join(parts) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write, - for stdout")
    parser.add_argument("--check", action="store_true", help="compare with --output instead of writing it")
    arguments = parser.parse_args()
    text = generate()
    if arguments.check:
        current = pathlib.Path(arguments.output).read_text(encoding="utf-8")
        if current != text:
            print("%s differs from what this Python generates" % arguments.output, file=sys.stderr)
            return 1
        print("%s is up to date" % arguments.output)
    elif arguments.output == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(arguments.output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
