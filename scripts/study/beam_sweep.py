#!/usr/bin/env python3
"""Beam size and length penalty of a trained model, chosen on the development set.

Usage: scripts/study/beam_sweep.py MODEL_DIR [CHECKPOINT]   (CHECKPOINT: best, last or a path)

Translates data/multi30k/val.de with every beam size and GNMT length penalty alpha of the grid,
prints dev BLEU (sacreBLEU-compatible, cased, 13a) as a Markdown table with the wall time of
each translation, then test_2016_flickr BLEU for the best dev setting and for the default (beam 5,
alpha 1.0). Choosing on dev keeps the test set out of the choice.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data", "multi30k")
NMT = os.path.join(ROOT, "build", "nmt")
BEAMS = [1, 3, 5, 10]
ALPHAS = [0.0, 0.6, 1.0, 1.4]


def bleu(model_dir, checkpoint, split, beam, alpha):
    source, reference = os.path.join(DATA, split + ".de"), os.path.join(DATA, split + ".en")
    start = time.monotonic()
    result = subprocess.run([NMT, "evaluate", "--model", model_dir, "--checkpoint", checkpoint, "--src", source,
                             "--ref", reference, "--beam-size", str(beam), "--length-penalty", str(alpha),
                             "--json", "--quiet"], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"beam_sweep: nmt evaluate failed:\n{result.stderr}")
    return json.loads(result.stdout)["bleu"], time.monotonic() - start


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    model_dir = sys.argv[1]
    checkpoint = sys.argv[2] if len(sys.argv) > 2 else "best"
    print("| beam | " + " | ".join(f"alpha {alpha}" for alpha in ALPHAS) + " |")
    print("| ---: | " + " | ".join("---:" for _ in ALPHAS) + " |")
    scores = {}
    for beam in BEAMS:
        cells = []
        for alpha in ALPHAS if beam > 1 else [0.0]:
            score, seconds = bleu(model_dir, checkpoint, "val", beam, alpha)
            scores[(beam, alpha)] = score
            cells.append(f"{score:.2f} ({seconds:.1f} s)")
        if beam == 1:
            cells += ["same"] * (len(ALPHAS) - 1)  # greedy search ignores the length penalty
        print(f"| {beam} | " + " | ".join(cells) + " |", flush=True)
    best_beam, best_alpha = max(scores, key=scores.get)
    for beam, alpha, what in [(best_beam, best_alpha, "best on dev"), (5, 1.0, "default")]:
        score, seconds = bleu(model_dir, checkpoint, "test_2016_flickr", beam, alpha)
        print(f"test_2016_flickr, beam {beam}, alpha {alpha} ({what}): BLEU {score:.2f} ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
