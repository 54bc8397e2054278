#!/usr/bin/env python3
"""Markup and protected spans, measured on Multi30k (docs/documents.md and docs/benchmarks.md).

Usage: scripts/bench/markup.py MODEL_DIR [OUTPUT_DIR] [--sets val,test_2016_flickr] [--repeats 3]

For each set (source data/multi30k/SET.SRC, reference SET.TGT, the languages from the model's
config.toml), from a fixed seed:
  1. plain: the lines with nothing protected (--placeholders none), and as translate does by
     default (every built-in kind protected): BLEU;
  2. tags: one to three inline elements per line (<b>, <i>, <a href="...">, some nested) around
     words and phrases, and an empty element (<br/>) in some, translated with --markup xml: the
     share of lines whose output parses as XML, the share of tags that come back (each exactly as
     often as in the input), and BLEU of the output with its tags removed;
  3. spans: a URL, an e-mail address, a number with a unit, {name} or %s put between two words of
     each line, translated as by default: the share that come back exactly once, and BLEU of the
     output with them removed;
  4. time: translating test_2016_flickr's lines plainly (--split-sentences no --cut-sentences no
     --placeholders none) against with everything on (splitting, cutting long sentences, --markup
     html, all placeholders), alternating A/B
     (--repeats runs each, model loading included; the median).
Prints one Markdown table per measure; the files go to OUTPUT_DIR (default MODEL_DIR/markup).
Standard library only; the translations and BLEU come from build/nmt.
"""
import os
import random
import re
import statistics
import sys
import time
import xml.etree.ElementTree as ElementTree

from multi30k_runs import DATA, bleu, command_line, read_lines, run, translate, with_span

def tagged(line, generator):
    """`line` with inline elements around some of its words; the tags it holds."""
    words = line.split(" ")
    opens = {}  # word index -> tags opening before it
    closes = {}  # word index -> tags closing after it
    taken = []
    for _ in range(generator.randint(1, 3)):
        first = generator.randrange(len(words))
        last = min(len(words) - 1, first + generator.randint(0, 2))
        if any(not (last < a or first > b) and not (a <= first and last <= b) for a, b in taken):
            continue  # would cross another element
        tag = generator.choice(["b", "i", "a"])
        start = '<a href="https://example.com/?a=1&amp;b=2">' if tag == "a" else f"<{tag}>"
        opens.setdefault(first, []).append(start)
        closes.setdefault(last, []).insert(0, f"</{tag}>")
        taken.append((first, last))
    out = []
    for i, word in enumerate(words):
        out.append("".join(opens.get(i, [])) + word.replace("&", "&amp;").replace("<", "&lt;") +
                   "".join(closes.get(i, [])))
    text = " ".join(out)
    if generator.random() < 0.3:
        text += "<br/>"
    return text


TAG = re.compile(r"<[^>]*>")


def tags_of(text):
    return sorted(TAG.findall(text))


def well_formed(text):
    try:
        ElementTree.fromstring("<r>" + text + "</r>")
        return True
    except ElementTree.ParseError:
        return False


def untagged(text):
    return TAG.sub("", text).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def without(text, span):
    return " ".join(text.replace(span, " ").split())


def timed(arguments):
    start = time.perf_counter()
    run(arguments)
    return time.perf_counter() - start


def main():
    arguments, output, source_language, target_language = command_line(__doc__.split("\n")[0], "markup")
    rows = {}
    for name in arguments.sets.split(","):
        sources = read_lines(os.path.join(DATA, f"{name}.{source_language}"))
        references = read_lines(os.path.join(DATA, f"{name}.{target_language}"))
        generator = random.Random(1)
        row = {}
        plain = translate(arguments.model, sources, output, name + ".plain", ["--placeholders", "none"])
        row["plain"] = bleu(plain, references, output, name + ".plain.bleu")
        protected = translate(arguments.model, sources, output, name + ".default")
        row["default"] = bleu(protected, references, output, name + ".default.bleu")

        marked = [tagged(line, generator) for line in sources]
        out = translate(arguments.model, marked, output, name + ".tags", ["--markup", "xml"])
        row["xml"] = sum(well_formed(text) for text in out) / len(out)
        tags_in = sum(len(tags_of(line)) for line in marked)
        tags_back = sum(len(tags_of(a)) for a, b in zip(out, marked) if tags_of(a) == tags_of(b))
        row["tags"] = tags_back / tags_in
        row["tags_in"] = tags_in
        row["tags_bleu"] = bleu([untagged(text) for text in out], references, output, name + ".tags.bleu")

        spanned = [with_span(line, generator) for line in sources]
        out = translate(arguments.model, [line for line, _ in spanned], output, name + ".spans")
        row["spans"] = sum(text.count(span) == 1 for text, (_, span) in zip(out, spanned)) / len(out)
        row["spans_bleu"] = bleu([without(text, span) for text, (_, span) in zip(out, spanned)], references, output,
                                 name + ".spans.bleu")
        rows[name] = row
        print(f"{name}: {row}", file=sys.stderr)

    names = arguments.sets.split(",")
    print("| | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    lines = [
        ("plain lines, `--placeholders none`: BLEU", "plain", "{:.2f}"),
        ("plain lines, all placeholders (the default): BLEU", "default", "{:.2f}"),
        ("tagged lines: tags in the input", "tags_in", "{}"),
        ("tagged lines: output that parses as XML", "xml", "{:.1%}"),
        ("tagged lines: tags back (each as often as in the input)", "tags", "{:.1%}"),
        ("tagged lines: BLEU with the tags removed", "tags_bleu", "{:.2f}"),
        ("lines with a span: spans back exactly once", "spans", "{:.1%}"),
        ("lines with a span: BLEU with the span removed", "spans_bleu", "{:.2f}"),
    ]
    for label, key, form in lines:
        print(f"| {label} | " + " | ".join(form.format(rows[n][key]) for n in names) + " |")

    test = os.path.join(DATA, f"test_2016_flickr.{source_language}")
    base = ["translate", "--model", arguments.model, "--input", test, "--output", os.path.join(output, "time.hyp"),
            "--quiet"]
    variants = {"plain": base + ["--split-sentences", "no", "--cut-sentences", "no", "--placeholders", "none"],
                "all on": base + ["--markup", "html"]}
    times = {key: [] for key in variants}
    for _ in range(arguments.repeats):
        for key, command in variants.items():
            times[key].append(timed(command))
    print()
    print("| test_2016_flickr, beam 5 | seconds (median) |")
    print("| --- | ---: |")
    for key in variants:
        print(f"| {key} | {statistics.median(times[key]):.2f} |")


if __name__ == "__main__":
    main()
