#!/usr/bin/env python3
"""Protected spans placed by the attention or as placeholder tokens, measured on Multi30k
(docs/documents.md, "Placeholders", and docs/benchmarks.md).

Usage: scripts/bench/placeholders.py PLAIN_MODEL MASKED_MODEL [OUTPUT_DIR] [--sets val,test_2016_flickr]

PLAIN_MODEL is trained without placeholder tokens, MASKED_MODEL the same recipe with
placeholder-share; both the same number of updates. Three ways are measured: the plain model (spans
placed by the attention), the masked model with --placeholder-tokens no (the same) and with its
tokens (the default). For each set (source data/multi30k/SET.SRC, reference SET.TGT), from a fixed
seed:
  1. plain: the lines with nothing protected: BLEU (what training with masked spans costs);
  2. between words: a URL, an e-mail address, a number with a unit, {name} or %s put between two
     words of each line: the share that come back exactly once, and BLEU with them removed;
  3. at the start and at the end: the same spans before the first word, or before the final full
     stop (or at the end): the share whose output has it at the same end;
  4. in a word's place: the lines whose source and reference share a word (a name or a number,
     not the first word, once on each side), that word replaced by one of the spans on both sides:
     the share placed as in the reference (the word before it or the word after it the same as
     the reference's), and how many lines there are.
Prints one Markdown table; the files go to OUTPUT_DIR (default MASKED_MODEL/placeholders).
Standard library only; the translations and BLEU come from build/nmt.
"""
import argparse
import os
import random
import re
import sys

from multi30k_runs import DATA, SPANS, bleu, model_languages, read_lines, translate, with_span

WORD = re.compile(r"^[\"'(„“]*(.*?)[\"'.,;:!?)“”]*$")


def at_an_end(line, generator):
    """The line with a span before its first word or before its final full stop; the span and
    which end ("start" or "end")."""
    span = generator.choice(SPANS)
    if generator.random() < 0.5:
        return span + " " + line, span, "start"
    if line.endswith("."):
        return line[:-1].rstrip() + " " + span + ".", span, "end"
    return line + " " + span, span, "end"


def at_its_end(text, span, end):
    core = text.strip().rstrip(".!?").rstrip()
    return core.startswith(span) if end == "start" else core.endswith(span)


def bare(word):
    return WORD.match(word).group(1)


def shared_word(source, reference):
    """A word both sides hold once, not first: a name (a capital letter) or a number; or None."""
    source_words, reference_words = [bare(w) for w in source.split()], [bare(w) for w in reference.split()]
    for word in source_words[1:]:
        if len(word) < 2 and not word.isdigit():
            continue
        if not (any(c.isupper() for c in word) or any(c.isdigit() for c in word)):
            continue
        if source_words.count(word) == 1 and reference_words.count(word) == 1 and reference_words[0] != word:
            return word
    return None


def replaced(text, word, span):
    """`text` with its one `word` (bare of punctuation) replaced by `span`."""
    return " ".join(w.replace(word, span, 1) if bare(w) == word else w for w in text.split())


def neighbours(text, span):
    """The words before and after `span` in `text` (bare, lower case; "" at an end), or None."""
    words = [bare(w) for w in text.replace(span, " \x00 ").split()]
    if words.count("\x00") != 1:
        return None
    at = words.index("\x00")
    return (words[at - 1].lower() if at > 0 else "", words[at + 1].lower() if at + 1 < len(words) else "")


def placed_as_in(text, reference, span):
    """Whether `span` has the word before it or the word after it that it has in `reference`."""
    got, want = neighbours(text, span), neighbours(reference, span)
    return got is not None and want is not None and (got[0] == want[0] or got[1] == want[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("plain_model")
    parser.add_argument("masked_model")
    parser.add_argument("output", nargs="?")
    parser.add_argument("--sets", default="val,test_2016_flickr")
    arguments = parser.parse_args()
    output = arguments.output or os.path.join(arguments.masked_model, "placeholders")
    os.makedirs(output, exist_ok=True)
    source_language, target_language = model_languages(arguments.masked_model)
    ways = [("plain model, by the attention", arguments.plain_model, []),
            ("masked model, `--placeholder-tokens no`", arguments.masked_model, ["--placeholder-tokens", "no"]),
            ("masked model, its tokens (the default)", arguments.masked_model, [])]
    names = arguments.sets.split(",")
    rows = {}
    for name in names:
        sources = read_lines(os.path.join(DATA, f"{name}.{source_language}"))
        references = read_lines(os.path.join(DATA, f"{name}.{target_language}"))
        generator = random.Random(1)
        plain_bleu = {}
        inside = [with_span(line, generator) for line in sources]
        ends = [at_an_end(line, generator) for line in sources]
        places = []
        for source, reference in zip(sources, references):
            word = shared_word(source, reference)
            if word is not None:
                span = generator.choice(SPANS)
                places.append((replaced(source, word, span), replaced(reference, word, span), span))
        for w, (label, model, extra) in enumerate(ways):
            tag = f"{name}.{w}"
            row = rows.setdefault((name, w), {})
            if model not in plain_bleu:  # plain lines: nothing protected, so one run per model
                plain = translate(model, sources, output, tag + ".plain", ["--placeholders", "none"])
                plain_bleu[model] = bleu(plain, references, output, tag + ".plain.bleu")
            row["plain"] = plain_bleu[model]
            out = translate(model, [line for line, _ in inside], output, tag + ".between", extra)
            row["back"] = sum(text.count(span) == 1 for text, (_, span) in zip(out, inside)) / len(out)
            row["bleu"] = bleu([" ".join(text.replace(span, " ").split()) for text, (_, span) in zip(out, inside)],
                               references, output, tag + ".between.bleu")
            out = translate(model, [line for line, _, _ in ends], output, tag + ".ends", extra)
            row["ends"] = sum(at_its_end(text, span, end) for text, (_, span, end) in zip(out, ends)) / len(out)
            out = translate(model, [source for source, _, _ in places], output, tag + ".places", extra)
            row["places"] = sum(placed_as_in(text, reference, span)
                                for text, (_, reference, span) in zip(out, places)) / max(1, len(places))
            row["lines"] = len(places)
            print(f"{name} {label}: {row}", file=sys.stderr)

    print("| | " + " | ".join(f"{label}: {name}" for label, _, _ in ways for name in names) + " |")
    print("| --- |" + " ---: |" * (len(ways) * len(names)))
    lines = [("plain lines: BLEU", "plain", "{:.2f}"),
             ("a span between words: back exactly once", "back", "{:.1%}"),
             ("a span between words: BLEU with it removed", "bleu", "{:.2f}"),
             ("a span at the start or the end: at the same end", "ends", "{:.1%}"),
             ("a span in a shared word's place: placed as in the reference", "places", "{:.1%}"),
             ("a span in a shared word's place: lines", "lines", "{}")]
    for label, key, form in lines:
        print(f"| {label} | " + " | ".join(form.format(rows[(n, w)][key]) for w in range(len(ways)) for n in names) +
              " |")


if __name__ == "__main__":
    main()
