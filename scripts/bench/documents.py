#!/usr/bin/env python3
"""Translating documents, measured on Multi30k (docs/documents.md and docs/benchmarks.md).

Usage: scripts/bench/documents.py MODEL_DIR [OUTPUT_DIR] [--sets val,test_2016_flickr] [--repeats 3]

For each set (source data/multi30k/SET.SRC, reference SET.TGT, the languages from the model's
config.toml):
  1. lines: the set a caption a line, with sentence splitting (the default) and without (and
     without --cut-sentences: a line is one sequence);
  2. paragraphs: runs of 2-8 consecutive captions joined by a space (the same runs every time, from
     a fixed seed), translated with splitting and without, against the same runs of the
     line-by-line translations; BLEU against the joined references;
  3. BLEU by paragraph source length, in bins of 10 words, with and without splitting: a table
     and a plot (OUTPUT_DIR/bleu_by_length.svg, and .png when chromium is installed);
  4. the time of translating the set's lines with splitting and without, alternating A/B
     (--repeats runs each, model loading included; the median is reported).
The images of consecutive captions are unrelated: the paragraphs test length, not discourse.
Prints one Markdown table per measure; the files go to OUTPUT_DIR (default MODEL_DIR/documents).
Standard library only; the translations and BLEU come from build/nmt.
"""
import os
import random
import shutil
import statistics
import subprocess
import time
from xml.sax.saxutils import escape

from multi30k_runs import DATA, bleu, command_line, length_label, print_cost, read_lines, run, write_lines


def translate(model, source, output, split, extra=()):
    # Whole: one sequence a line, long sentences not cut at their clauses either (clauses.py does).
    whole = [] if split else ["--cut-sentences", "no"]
    run(["translate", "--model", model, "--input", source, "--output", output, "--quiet",
         "--split-sentences", "yes" if split else "no", *whole, *extra])
    return read_lines(output)


def paragraph_runs(count, seed=1):
    """Runs of 2-8 consecutive line indices covering 0..count-1 (the last may be shorter)."""
    generator = random.Random(seed)
    runs, start = [], 0
    while start < count:
        length = min(generator.randint(2, 8), count - start)
        runs.append(list(range(start, start + length)))
        start += length
    return runs


def joined(lines, runs):
    return [" ".join(lines[i] for i in run) for run in runs]


def plot(path, bins, series):
    """BLEU against source length, one line per series, as Bahdanau et al. (2015), Figure 2."""
    width, height, left, bottom, top = 560, 340, 60, 50, 30
    inner_w, inner_h = width - left - 20, height - bottom - top
    xs = list(range(len(bins)))
    top_bleu = max(max(values) for values in series.values()) * 1.4 or 1  # room for the legend

    def point(i, value):
        x = left + (inner_w * (i + 0.5) / len(bins))
        return x, top + inner_h * (1 - value / top_bleu)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="12">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{left}" y1="{top + inner_h}" x2="{left + inner_w}" y2="{top + inner_h}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + inner_h}" stroke="black"/>',
             f'<text x="{left + inner_w / 2}" y="{height - 10}" text-anchor="middle">source length (words)</text>',
             f'<text x="15" y="{top + inner_h / 2}" transform="rotate(-90 15 {top + inner_h / 2})" '
             'text-anchor="middle">BLEU</text>']
    for i, label in enumerate(bins):
        x, _ = point(i, 0)
        parts.append(f'<text x="{x}" y="{top + inner_h + 18}" text-anchor="middle">{escape(label)}</text>')
    for step in range(0, int(top_bleu) + 1, 10):
        _, y = point(0, step)
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{step}</text>')
        parts.append(f'<line x1="{left}" y1="{y}" x2="{left + inner_w}" y2="{y}" stroke="#ddd"/>')
    colours = ["#1f77b4", "#d62728", "#2ca02c"]
    for (name, values), colour in zip(series.items(), colours):
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (point(i, v) for i, v in zip(xs, values)))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, value in zip(xs, values):
            x, y = point(i, value)
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
    for k, (name, colour) in enumerate(zip(series, colours)):
        y = top + 10 + 16 * k
        parts.append(f'<line x1="{left + 20}" y1="{y}" x2="{left + 40}" y2="{y}" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{left + 45}" y="{y + 4}">{escape(name)}</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(parts) + "\n")
    browser = shutil.which("chromium")
    if browser:
        png = path[:-4] + ".png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                        f"--window-size={width},{height}", "--hide-scrollbars", "file://" + os.path.abspath(path)],
                       capture_output=True)


def main():
    arguments, output, source_language, target_language = command_line(__doc__.split("\n")[0], "documents")

    rows, length_rows, timing_rows = [], [], []
    by_length = {"line by line": {}, "paragraphs, split": {}, "paragraphs, whole": {}}
    for name in arguments.sets.split(","):
        source_file = os.path.join(DATA, f"{name}.{source_language}")
        sources, references = read_lines(source_file), read_lines(os.path.join(DATA, f"{name}.{target_language}"))
        lines_split = translate(arguments.model, source_file, os.path.join(output, f"{name}.split.hyp"), True)
        lines_whole = translate(arguments.model, source_file, os.path.join(output, f"{name}.whole.hyp"), False)
        changed = sum(a != b for a, b in zip(lines_split, lines_whole))

        runs = paragraph_runs(len(sources))
        paragraph_file = os.path.join(output, f"{name}.paragraphs.{source_language}")
        write_lines(paragraph_file, joined(sources, runs))
        paragraph_references = joined(references, runs)
        paragraphs_split = translate(arguments.model, paragraph_file, os.path.join(output, f"{name}.p.split.hyp"), True)
        paragraphs_whole = translate(arguments.model, paragraph_file, os.path.join(output, f"{name}.p.whole.hyp"),
                                     False)
        paragraphs_lines = joined(lines_whole, runs)
        rows.append((name, len(sources), len(runs),
                     bleu(lines_split, references, output, f"{name}.lines.split"),
                     bleu(lines_whole, references, output, f"{name}.lines.whole"), changed,
                     bleu(paragraphs_lines, paragraph_references, output, f"{name}.p.lines"),
                     bleu(paragraphs_split, paragraph_references, output, f"{name}.p.split"),
                     bleu(paragraphs_whole, paragraph_references, output, f"{name}.p.whole")))

        # Paragraphs binned by source words: 10-19, 20-29, ... (the last bin open).
        for k, run_lines in enumerate(runs):
            words = len(joined(sources, [run_lines])[0].split())
            key = min(words // 10, 8)
            for series, hypotheses in (("line by line", paragraphs_lines), ("paragraphs, split", paragraphs_split),
                                       ("paragraphs, whole", paragraphs_whole)):
                entry = by_length[series].setdefault(key, ([], []))
                entry[0].append(hypotheses[k])
                entry[1].append(paragraph_references[k])

        # Splitting's cost on the set a caption a line: A/B alternating, loading included.
        seconds = {True: [], False: []}
        for _ in range(arguments.repeats):
            for split in (True, False):
                start = time.perf_counter()
                translate(arguments.model, source_file, os.path.join(output, f"{name}.timing.hyp"), split)
                seconds[split].append(time.perf_counter() - start)
        timing_rows.append((name, statistics.median(seconds[True]), statistics.median(seconds[False])))

    keys = sorted(by_length["line by line"])
    labels = [length_label(k) for k in keys]
    series = {}
    for name, bins in by_length.items():
        series[name] = [bleu(bins[k][0], bins[k][1], output, f"bin{k}.{name.replace(' ', '_').replace(',', '')}")
                        for k in keys]
    for k, label in zip(keys, labels):
        length_rows.append((label, len(by_length["line by line"][k][0]),
                            *(series[name][keys.index(k)] for name in by_length)))
    plot(os.path.join(output, "bleu_by_length.svg"), labels, series)

    print("| set | lines | paragraphs | lines, split | lines, whole | lines changed | paragraphs from line by line "
          "| paragraphs, split | paragraphs, whole |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.2f} | {row[4]:.2f} | {row[5]} | {row[6]:.2f} | "
              f"{row[7]:.2f} | {row[8]:.2f} |")
    print()
    print("| source words | paragraphs | " + " | ".join(by_length) + " |")
    print("|---|---:|" + "---:|" * len(by_length))
    for row in length_rows:
        print(f"| {row[0]} | {row[1]} | " + " | ".join(f"{value:.2f}" for value in row[2:]) + " |")
    print()
    print_cost(timing_rows, "split", "whole", arguments.repeats)


if __name__ == "__main__":
    main()
