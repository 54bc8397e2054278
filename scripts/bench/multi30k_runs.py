"""What the Multi30k benchmark scripts (documents.py, markup.py, placeholders.py) share: build/nmt
runs, line files, BLEU, translations, spans to protect and a model's languages. Standard library
only."""
import argparse
import json
import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NMT = os.path.join(ROOT, "build", "nmt")
DATA = os.path.join(ROOT, "data", "multi30k")


def run(arguments):
    """build/nmt with `arguments`; the script stops, with nmt's error, when it fails."""
    result = subprocess.run([NMT] + arguments, capture_output=True, text=True)
    if result.returncode != 0:
        script = os.path.basename(sys.argv[0])
        sys.exit(f"{script}: nmt {' '.join(arguments)} failed:\n{result.stderr.strip()}")
    return result


def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().split("\n")[:-1]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


def bleu(hypotheses, references, directory, name):
    """Corpus BLEU by nmt evaluate, the texts kept in DIRECTORY/NAME.hyp and .ref."""
    hypothesis_file = os.path.join(directory, name + ".hyp")
    reference_file = os.path.join(directory, name + ".ref")
    write_lines(hypothesis_file, hypotheses)
    write_lines(reference_file, references)
    result = run(["evaluate", "--hyp", hypothesis_file, "--ref", reference_file, "--json"])
    return json.loads(result.stdout)["bleu"]


def translate(model, lines, directory, name, extra=()):
    """LINES translated by MODEL (nmt translate --quiet, with EXTRA options), kept in
    DIRECTORY/NAME.src and .hyp."""
    source, output = os.path.join(directory, name + ".src"), os.path.join(directory, name + ".hyp")
    write_lines(source, lines)
    run(["translate", "--model", model, "--input", source, "--output", output, "--quiet", *extra])
    return read_lines(output)


# Spans that must come back exactly, one of each built-in kind but variables.
SPANS = ["https://example.com/photos?id=42", "info@example.org", "3,5 kg", "{name}", "%s"]


def with_span(line, generator):
    """LINE with one of SPANS put between two of its words; the span."""
    words = line.split(" ")
    span = generator.choice(SPANS)
    at = generator.randint(1, max(1, len(words) - 1))
    return " ".join(words[:at] + [span] + words[at:]), span


def model_languages(model):
    """The source and target languages of a model, from its training files' extensions."""
    with open(os.path.join(model, "config.toml"), "rb") as handle:
        train = tomllib.load(handle)["train"]
    return tuple(os.path.splitext(train[key].split(",")[0])[1][1:] for key in ("train-source", "train-target"))


def command_line(description, folder):
    """The scripts' command line: MODEL_DIR [OUTPUT_DIR] [--sets] [--repeats]. Returns the arguments,
    the output directory (made; default MODEL_DIR/FOLDER) and the model's languages."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model")
    parser.add_argument("output", nargs="?")
    parser.add_argument("--sets", default="val,test_2016_flickr")
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    output = arguments.output or os.path.join(arguments.model, folder)
    os.makedirs(output, exist_ok=True)
    return (arguments, output, *model_languages(arguments.model))


def length_label(key):
    """The label of bin KEY of source lengths in tens of words (the last, 8, open: "80+")."""
    return f"{10 * key}-{10 * key + 9}" if key < 8 else f"{10 * key}+"


def print_cost(rows, with_label, without_label, repeats):
    """A Markdown table of (set, seconds with, seconds without) rows and what "with" costs."""
    print(f"| set | seconds, {with_label} | seconds, {without_label} | cost |  (median of {repeats}, loading included)")
    print("|---|---:|---:|---:|")
    for name, with_seconds, without_seconds in rows:
        print(f"| {name} | {with_seconds:.2f} | {without_seconds:.2f} | {100 * (with_seconds / without_seconds - 1):+.1f}% |")
