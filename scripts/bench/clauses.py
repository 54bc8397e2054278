#!/usr/bin/env python3
"""Long sentences cut at their clauses (--cut-sentences), measured on Multi30k (docs/benchmarks.md).

Usage: scripts/bench/clauses.py MODEL_DIR [OUTPUT_DIR] [--sets val,test_2016_flickr] [--repeats 3]

For each set (source data/multi30k/SET.SRC, reference SET.TGT, the languages from the model's
config.toml), runs of 2-8 consecutive captions (the same runs as documents.py's paragraphs) are
joined into one long sentence each: every caption but the last loses its final full stop and is
followed by "; ". The references are joined the same way. Each long sentence is translated
  1. whole (--cut-sentences no),
  2. cut after its commas, semicolons and colons into parts within the model's training max-length
     (--cut-sentences auto, the default), and within 40 subwords (--cut-sentences 40);
and compared with the captions translated one by one and joined the same way. Prints BLEU on all
of them, BLEU on those auto cuts (longer than the training max-length), BLEU by source length in
bins of 10 words, and the time of translating test_2016_flickr a caption a line with auto and with
no (alternating, --repeats runs each, model loading included; the median).
The images of consecutive captions are unrelated: the sentences test length, not meaning.
Standard library only; the translations and BLEU come from build/nmt.
"""
import json
import os
import statistics
import time

from documents import paragraph_runs
from multi30k_runs import DATA, bleu, command_line, length_label, print_cost, read_lines, run, write_lines

CUTS = ("no", "auto", "40")


def long_sentence(captions):
    """Captions joined into one sentence: each but the last without its final stop, then "; "."""
    parts = [caption.rstrip() for caption in captions]
    parts = [part[:-1].rstrip() if part.endswith(".") and i + 1 < len(parts) else part
             for i, part in enumerate(parts)]
    return "; ".join(parts)


def translate(model, source, output, cut):
    """The translations of SOURCE with --cut-sentences CUT, and for each line whether it was cut."""
    run(["translate", "--model", model, "--input", source, "--output", output, "--quiet",
         "--output-format", "jsonl", "--cut-sentences", cut])
    records = [json.loads(line) for line in read_lines(output)]
    return [record["text"] for record in records], [bool(record["cut"]) for record in records]


def main():
    arguments, output, source_language, target_language = command_line(__doc__.split("\n")[0], "clauses")

    rows, cut_rows, timing_rows = [], [], []
    by_length = {}  # series -> bin -> (hypotheses, references)
    for name in arguments.sets.split(","):
        source_file = os.path.join(DATA, f"{name}.{source_language}")
        sources, references = read_lines(source_file), read_lines(os.path.join(DATA, f"{name}.{target_language}"))
        lines, _ = translate(arguments.model, source_file, os.path.join(output, f"{name}.lines.jsonl"), "no")
        runs = paragraph_runs(len(sources))
        long_sources = [long_sentence([sources[i] for i in run_lines]) for run_lines in runs]
        long_references = [long_sentence([references[i] for i in run_lines]) for run_lines in runs]
        long_file = os.path.join(output, f"{name}.long.{source_language}")
        write_lines(long_file, long_sources)
        series = {"line by line": [long_sentence([lines[i] for i in run_lines]) for run_lines in runs]}
        was_cut = {}
        for cut in CUTS:
            series[f"--cut-sentences {cut}"], was_cut[cut] = translate(
                arguments.model, long_file, os.path.join(output, f"{name}.long.{cut}.jsonl"), cut)
        rows.append((name, len(runs), sum(was_cut["auto"]),
                     *(bleu(hypotheses, long_references, output, f"{name}.{k}") for k, hypotheses in
                       enumerate(series.values()))))
        # The sentences auto cut: longer than the model's training max-length.
        chosen = [k for k, cut in enumerate(was_cut["auto"]) if cut]
        if chosen:
            cut_rows.append((name, len(chosen), *(bleu([hypotheses[k] for k in chosen],
                                                       [long_references[k] for k in chosen], output,
                                                       f"{name}.cut.{j}")
                                                  for j, hypotheses in enumerate(series.values()))))
        for k, source in enumerate(long_sources):
            key = min(len(source.split()) // 10, 8)
            for label, hypotheses in series.items():
                entry = by_length.setdefault(label, {}).setdefault(key, ([], []))
                entry[0].append(hypotheses[k])
                entry[1].append(long_references[k])

    # Cutting's cost on a caption a line (nothing to cut): A/B alternating, loading included.
    test_file = os.path.join(DATA, f"test_2016_flickr.{source_language}")
    seconds = {"auto": [], "no": []}
    for _ in range(arguments.repeats):
        for cut in seconds:
            start = time.perf_counter()
            translate(arguments.model, test_file, os.path.join(output, "timing.jsonl"), cut)
            seconds[cut].append(time.perf_counter() - start)
    timing_rows.append(("test_2016_flickr", statistics.median(seconds["auto"]), statistics.median(seconds["no"])))

    labels = list(by_length)
    print("| set | long sentences | cut by auto | " + " | ".join(labels) + " |")
    print("|---|---:|---:|" + "---:|" * len(labels))
    for row in rows:
        print(f"| {row[0]} | {row[1]} | {row[2]} | " + " | ".join(f"{value:.2f}" for value in row[3:]) + " |")
    print()
    print("| set: those auto cut | sentences | " + " | ".join(labels) + " |")
    print("|---|---:|" + "---:|" * len(labels))
    for row in cut_rows:
        print(f"| {row[0]} | {row[1]} | " + " | ".join(f"{value:.2f}" for value in row[2:]) + " |")
    print()
    keys = sorted(by_length["line by line"])
    print("| source words | sentences | " + " | ".join(labels) + " |")
    print("|---|---:|" + "---:|" * len(labels))
    for key in keys:
        values = [bleu(*by_length[series_name][key], output, f"bin{key}.{j}") for j, series_name in enumerate(labels)]
        print(f"| {length_label(key)} | {len(by_length['line by line'][key][0])} | " +
              " | ".join(f"{value:.2f}" for value in values) + " |")
    print()
    print_cost(timing_rows, "auto", "no", arguments.repeats)


if __name__ == "__main__":
    main()
