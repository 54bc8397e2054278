#!/usr/bin/env python3
"""Scores the runs of scripts/study/run.sh and prints one Markdown table.

Usage: scripts/study/report.py [STUDY_DIR] [NAME...]   (default models/study, every run in it)
Environment: STUDY_AVERAGE_LAST (how many of the newest kept checkpoints to average, default 3),
STUDY_AT_STEP (the update at which every run's dev BLEU is also shown, default 3000: runs trained
side by side may get different speeds, so equal updates compare the settings, equal time the cost)

For each run: training steps and mean target tokens/s (from metrics.jsonl), the best checkpoint's
step, dev greedy BLEU and time to it (wall time since the start of training, validations
included, as the trainer logs it; a resumed run counts from its resumption), dev BLEU of best.ckpt
with beam 5, test BLEU of best.ckpt with greedy search and beam 5, and dev and test BLEU (beam 5)
of the average of the newest kept step checkpoints (nmt average --last N), all with
`nmt evaluate` (sacreBLEU-compatible, cased, 13a). Translations use all cores, one run at a time.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data", "multi30k")
NMT = os.path.join(ROOT, "build", "nmt")  # replaced by the study's own copy when it has one


def run_nmt(*arguments):
    result = subprocess.run([NMT, *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"report: nmt {' '.join(arguments)} failed:\n{result.stderr}")
    return result.stdout


def bleu(model_dir, checkpoint, source, reference, beam):
    output = run_nmt("evaluate", "--model", model_dir, "--checkpoint", checkpoint, "--src", source, "--ref", reference,
                     "--beam-size", str(beam), "--json", "--quiet")
    return json.loads(output)["bleu"]


def training_facts(model_dir, at_step):
    steps, rates, best, at = 0, [], None, None
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as metrics:
        for line in metrics:
            record = json.loads(line)
            steps = max(steps, int(record.get("step", 0)))
            if record.get("event") == "train":
                rates.append(record["target_tokens_per_second"])
            elif record.get("event") == "validation":
                if record.get("best") == 1:
                    best = record
                if int(record["step"]) == at_step:
                    at = record["dev_bleu"]
    return steps, sum(rates) / max(len(rates), 1), best, at


def main():
    global NMT
    study_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "study")
    if os.access(os.path.join(study_dir, "nmt"), os.X_OK):
        NMT = os.path.join(study_dir, "nmt")
    names = sys.argv[2:] or sorted(name for name in os.listdir(study_dir)
                                   if os.path.isfile(os.path.join(study_dir, name, "best.ckpt")))
    test_de, test_en = os.path.join(DATA, "test_2016_flickr.de"), os.path.join(DATA, "test_2016_flickr.en")
    dev_de, dev_en = os.path.join(DATA, "val.de"), os.path.join(DATA, "val.en")
    last = int(os.environ.get("STUDY_AVERAGE_LAST", "3"))
    at_step = int(os.environ.get("STUDY_AT_STEP", "3000"))
    print(f"| run | steps | target tok/s | dev BLEU greedy at step {at_step} | best step | time to best | dev BLEU greedy | dev BLEU beam 5 "
          f"| test BLEU greedy | test BLEU beam 5 | dev BLEU beam 5, average of {last} | test BLEU beam 5, average of {last} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        model_dir = os.path.join(study_dir, name)
        steps, rate, best, at = training_facts(model_dir, at_step)
        dev_beam = bleu(model_dir, "best", dev_de, dev_en, 5)
        greedy = bleu(model_dir, "best", test_de, test_en, 1)
        beam = bleu(model_dir, "best", test_de, test_en, 5)
        averaged_cells = ["-", "-"]
        kept = [f for f in os.listdir(model_dir) if f.startswith("step-") and f.endswith(".ckpt")]
        if len(kept) > 1:
            averaged = os.path.join(model_dir, "averaged.ckpt")
            run_nmt("average", "--model", model_dir, "--last", str(last), "--output", averaged)
            averaged_cells = [f"{bleu(model_dir, averaged, dev_de, dev_en, 5):.2f}",
                              f"{bleu(model_dir, averaged, test_de, test_en, 5):.2f}"]
        minutes = best["elapsed_seconds"] / 60 if best else float("nan")
        at_cell = f"{at:.2f}" if at is not None else "-"
        print(f"| {name} | {steps} | {rate:.0f} | {at_cell} | {int(best['step']) if best else '-'} | {minutes:.1f} min "
              f"| {best['dev_bleu'] if best else float('nan'):.2f} | {dev_beam:.2f} | {greedy:.2f} | {beam:.2f} | "
              f"{averaged_cells[0]} | {averaged_cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
