#!/usr/bin/env python3
"""The sizes of a lexical shortlist (nmt shortlist), chosen on the development set.

Usage: scripts/study/shortlist_sizes.py MODEL_DIR [TRANSLATE_OPTION ...]

For every (translations, frequent, batch sentences) of the grid, builds the model's shortlist,
translates data/multi30k/val.de with beam 5 through it and prints, as a Markdown table, dev BLEU
(sacreBLEU-compatible, cased, 13a), the mean number of target subwords a batch searched over, and
the in-process rate of nmt_bench translate on val; first the same without a shortlist. The options
after MODEL_DIR go to every translation (for example --checkpoint PATH --compute-type int8).
A batch's list is the union of its sentences' lists, so the batch size is one of the sizes. The
defaults of nmt shortlist were chosen with it on two models (docs/dev/performance-notes.md, "A shortlist's
batch"): the fastest sizes that keep both models' BLEU.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NMT = os.path.join(ROOT, "build", "nmt")
BENCH = os.path.join(ROOT, "build", "nmt_bench")
DATA = os.path.join(ROOT, "data", "multi30k")
TRANSLATIONS = [20, 30, 50, 80]
FREQUENT = [200, 500]
BATCH_SENTENCES = [8, 16, 0]  # 0: translate's --batch-size, 64


def bleu_and_size(model, shortlist, extra):
    """Dev BLEU at beam 5, and the mean list size per batch (from the debug log)."""
    listed = ["--shortlist", shortlist] if shortlist else []
    run = subprocess.run(
        [NMT, "evaluate", "--model", model, "--src", f"{DATA}/val.de", "--ref", f"{DATA}/val.en",
         "--beam-size", "5", "--quiet", "--json"] + listed + extra,
        capture_output=True, text=True, check=True, env={**os.environ, "SPDLOG_LEVEL": "debug"})
    sizes = [int(m.group(1)) for m in re.finditer(r"shortlist: (\d+) of", run.stderr)]
    return json.loads(run.stdout)["bleu"], (sum(sizes) / len(sizes) if sizes else None)


def rate(model, shortlist, extra):
    listed = ["--shortlist", shortlist] if shortlist else []
    out = subprocess.run([BENCH, "translate", "--model", model, "--input", f"{DATA}/val.de", "--beam-size", "5"]
                         + listed + extra, capture_output=True, text=True, check=True).stdout
    return float(out.split("|")[3])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    model, extra = sys.argv[1], sys.argv[2:]
    print("| translations | frequent | batch sentences | mean list per batch | dev BLEU, beam 5 | sentences/s (val, beam 5) |")
    print("| --- | --- | --- | --- | --- | --- |")
    bleu, _ = bleu_and_size(model, None, extra)
    print(f"| (none) | | | the whole vocabulary | {bleu:.2f} | {rate(model, None, extra):.1f} |", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        for translations in TRANSLATIONS:
            for frequent in FREQUENT:
                for batch in BATCH_SENTENCES:
                    path = os.path.join(scratch, f"{translations}_{frequent}_{batch}.bin")
                    subprocess.run([NMT, "shortlist", "--model", model, "--output", path, "--translations",
                                    str(translations), "--frequent", str(frequent), "--batch-sentences", str(batch)],
                                   check=True, capture_output=True)
                    bleu, size = bleu_and_size(model, path, extra)
                    print(f"| {translations} | {frequent} | {batch or 64} | {size:.0f} | {bleu:.2f} | "
                          f"{rate(model, path, extra):.1f} |", flush=True)


if __name__ == "__main__":
    main()
