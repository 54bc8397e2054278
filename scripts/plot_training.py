#!/usr/bin/env python3
"""Training curves from the metrics files that `nmt train` writes, as one self-contained SVG.

Usage: scripts/plot_training.py OUTPUT.svg MODEL_DIR [MODEL_DIR ...]

Left panel: dev BLEU (greedy, as validated during training) against wall-clock minutes.
Right panel: training loss (label-smoothed, per log window) and dev loss against minutes.
One colour per model directory, labelled with the directory's name. Standard library only, so
it runs under any Python 3.
"""
import json
import math
import os
import sys
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
PANEL_W, PANEL_H, MARGIN_L, MARGIN_B, MARGIN_T, GAP = 420, 280, 60, 50, 40, 80


def read_metrics(model_dir):
    path = os.path.join(model_dir, "metrics.jsonl")
    try:
        with open(path, encoding="utf-8") as handle:
            events = [json.loads(line) for line in handle if line.strip()]
    except OSError as error:
        sys.exit(f"plot_training: {path}: {error.strerror}; train a model into {model_dir} first")
    except json.JSONDecodeError as error:
        sys.exit(f"plot_training: {path}: not one JSON object per line ({error})")
    train = [(e["elapsed_seconds"] / 60, e["loss"]) for e in events if e.get("event") == "train"]
    dev = [(e["elapsed_seconds"] / 60, e["dev_bleu"], e["dev_loss"]) for e in events if e.get("event") == "validation"]
    if not dev:
        sys.exit(f"plot_training: {path} has no validation events yet")
    return train, dev


def nice_ticks(low, high, count=5):
    span = (high - low) or 1.0
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 2.5, 5, 10):
        if raw <= step * magnitude:
            step *= magnitude
            break
    first = (low // step) * step
    ticks, value = [], first
    while value <= high + 1e-9:
        if value >= low - 1e-9:
            ticks.append(round(value, 10))
        value += step
    return ticks


class Panel:
    def __init__(self, x0, title, x_max, y_min, y_max, y_label):
        self.x0, self.title, self.x_max, self.y_min, self.y_max, self.y_label = x0, title, x_max, y_min, y_max, y_label

    def point(self, x, y):
        px = self.x0 + MARGIN_L + x / self.x_max * PANEL_W
        py = MARGIN_T + PANEL_H - (y - self.y_min) / (self.y_max - self.y_min) * PANEL_H
        return px, py

    def frame(self):
        parts = []
        left, top = self.x0 + MARGIN_L, MARGIN_T
        parts.append(f'<rect x="{left}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#444"/>')
        parts.append(f'<text x="{left + PANEL_W / 2}" y="{top - 14}" text-anchor="middle" font-weight="bold">{escape(self.title)}</text>')
        for tick in nice_ticks(0, self.x_max):
            px, _ = self.point(tick, self.y_min)
            parts.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{top + PANEL_H}" stroke="#ddd"/>')
            parts.append(f'<text x="{px:.1f}" y="{top + PANEL_H + 16}" text-anchor="middle">{tick:g}</text>')
        for tick in nice_ticks(self.y_min, self.y_max):
            _, py = self.point(0, tick)
            parts.append(f'<line x1="{left}" y1="{py:.1f}" x2="{left + PANEL_W}" y2="{py:.1f}" stroke="#ddd"/>')
            parts.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">{tick:g}</text>')
        parts.append(f'<text x="{left + PANEL_W / 2}" y="{top + PANEL_H + 36}" text-anchor="middle">training time (minutes)</text>')
        parts.append(f'<text transform="translate({self.x0 + 16},{top + PANEL_H / 2}) rotate(-90)" text-anchor="middle">{escape(self.y_label)}</text>')
        return parts

    def line(self, points, colour, dashed=False, markers=False, tooltip=""):
        if not points:
            return []
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in (self.point(px, py) for px, py in points))
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        parts = [f'<polyline points="{coordinates}" fill="none" stroke="{colour}" stroke-width="1.8"{dash}>'
                 f'<title>{escape(tooltip)}</title></polyline>']
        if markers:
            for px, py in points:
                x, y = self.point(px, py)
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}">'
                             f'<title>{escape(tooltip)}: {py:.2f} at {px:.1f} min</title></circle>')
        return parts


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2])
    output, model_dirs = sys.argv[1], sys.argv[2:]
    runs = [(os.path.basename(os.path.normpath(d)), *read_metrics(d)) for d in model_dirs]

    x_max = max(max([t for t, _ in train] + [t for t, _, _ in dev]) for _, train, dev in runs) * 1.02
    bleu_max = max(b for _, _, dev in runs for _, b, _ in dev)
    losses = [v for _, train, dev in runs for v in [l for _, l in train] + [l for _, _, l in dev]]
    bleu = Panel(0, "dev BLEU (greedy)", x_max, 0, max(1.0, bleu_max * 1.1), "BLEU")
    loss = Panel(MARGIN_L + PANEL_W + GAP, "loss (solid: training, label-smoothed; dashed: dev)", x_max,
                 min(losses) * 0.9, min(max(losses), 3 * min(losses) + 4), "cross-entropy per token")

    width = 2 * (MARGIN_L + PANEL_W) + GAP + 20
    height = MARGIN_T + PANEL_H + MARGIN_B + 22 * len(runs) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">', f'<rect width="{width}" height="{height}" fill="white"/>']
    parts += bleu.frame() + loss.frame()
    for index, (name, train, dev) in enumerate(runs):
        colour = COLOURS[index % len(COLOURS)]
        parts += bleu.line([(t, b) for t, b, _ in dev], colour, markers=True, tooltip=f"{name} dev BLEU")
        clipped = [(t, min(l, loss.y_max)) for t, l in train]
        parts += loss.line(clipped, colour, tooltip=f"{name} training loss")
        parts += loss.line([(t, l) for t, _, l in dev], colour, dashed=True, markers=True, tooltip=f"{name} dev loss")
        best = max(b for _, b, _ in dev)
        y = MARGIN_T + PANEL_H + MARGIN_B + 22 * index + 12
        parts.append(f'<rect x="{MARGIN_L}" y="{y - 9}" width="14" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{MARGIN_L + 20}" y="{y}">{escape(name)}: best dev BLEU {best:.2f}, '
                     f'{len(dev)} validations, {max(t for t, _, _ in dev):.1f} min</text>')
    parts.append("</svg>")
    with open(output + ".part", "w", encoding="utf-8") as handle:
        handle.write("\n".join(parts) + "\n")
    os.replace(output + ".part", output)
    print(f"plot_training: wrote {output}")


if __name__ == "__main__":
    main()
