#!/usr/bin/env python3
"""Terminology constraints on Multi30k: do they appear, what do they cost in BLEU and speed.

Usage: scripts/study/constraints.py MODEL_DIR [--split test_2016_flickr] [--rounds 2] [--seed 1]

Draws one or two phrases per sentence from its reference (a phrase is one or two consecutive words
that hold a letter; two phrases do not overlap), writes them as a --constraints file (tab between
phrases), then translates the split with beam 5 without and with the constraints, in alternating
rounds, each as a whole `nmt translate` command (process start and model loading included).
Prints a Markdown table: the share of constraints that appear in the output (as text), BLEU and
chrF2 against the reference (sacreBLEU-compatible, `nmt evaluate`), and sentences/s of the
fastest round of each.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data", "multi30k")
NMT = os.path.join(ROOT, "build", "nmt")


def draw_phrases(reference, rng):
    """One or two non-overlapping phrases of one or two words from `reference`."""
    words = reference.split()
    starts = [i for i, word in enumerate(words) if any(c.isalpha() for c in word)]
    phrases, used = [], set()
    for _ in range(rng.choice([1, 2])):
        free = [i for i in starts if i not in used]
        if not free:
            break
        start = rng.choice(free)
        length = rng.choice([1, 2]) if start + 1 < len(words) and start + 1 not in used else 1
        used.update(range(start, start + length))
        phrases.append((start, " ".join(words[start:start + length])))
    return [phrase for _, phrase in sorted(phrases)]


def translate(model, source, output, constraints=None):
    command = [NMT, "translate", "--model", model, "--input", source, "--output", output, "--beam-size", "5",
               "--quiet"]
    if constraints:
        command += ["--constraints", constraints]
    start = time.monotonic()
    subprocess.run(command, check=True)
    return time.monotonic() - start


def scores(hypotheses, reference):
    result = subprocess.run([NMT, "evaluate", "--hyp", hypotheses, "--ref", reference, "--json"],
                            capture_output=True, text=True, check=True)
    parsed = json.loads(result.stdout)
    return parsed["bleu"], parsed["chrf"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    source, reference = (os.path.join(DATA, args.split + suffix) for suffix in (".de", ".en"))
    with open(reference, encoding="utf-8") as f:
        references = f.read().splitlines()
    rng = random.Random(args.seed)
    drawn = [draw_phrases(line, rng) for line in references]
    work = tempfile.mkdtemp(prefix="nmt_constraints_")
    constraints = os.path.join(work, "constraints.txt")
    with open(constraints, "w", encoding="utf-8") as f:
        f.writelines("\t".join(phrases) + "\n" for phrases in drawn)

    runs = {"beam 5": None, "beam 5, constraints": constraints}
    seconds = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, given in runs.items():
            output = os.path.join(work, name.replace(" ", "_").replace(",", "") + ".hyp")
            seconds[name].append(translate(args.model, source, output, given))

    phrases = sum(len(p) for p in drawn)
    print(f"{args.split}: {len(references)} sentences, {phrases} constraints "
          f"({sum(len(p) == 2 for p in drawn)} sentences with two); seed {args.seed}; {args.rounds} rounds")
    print()
    print("| run | constraints in the output | BLEU | chrF2 | sentences/s (whole command) |")
    print("| --- | --- | --- | --- | --- |")
    for name in runs:
        output = os.path.join(work, name.replace(" ", "_").replace(",", "") + ".hyp")
        with open(output, encoding="utf-8") as f:
            hypotheses = f.read().splitlines()
        met = sum(phrase in hypothesis for hypothesis, ps in zip(hypotheses, drawn) for phrase in ps)
        bleu, chrf = scores(output, reference)
        speed = len(references) / min(seconds[name])
        print(f"| {name} | {met} / {phrases} ({100.0 * met / phrases:.1f}%) | {bleu:.2f} | {chrf:.2f} | {speed:.0f} |")
    print()
    print("seconds per round:", json.dumps({name: [round(s, 2) for s in times] for name, times in seconds.items()}))
    print("files:", work)


if __name__ == "__main__":
    sys.exit(main())
