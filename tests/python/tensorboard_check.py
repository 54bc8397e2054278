#!/usr/bin/env python3
"""Reads the TensorBoard event files of a training run with TensorBoard's own loader and checks
them against the run's metrics.jsonl (src/train/run_log.cpp): what TensorBoard shows is what the
metrics file says.

Usage: tests/python/tensorboard_check.py EVENTS_DIR METRICS_JSONL

Prints the tags TensorBoard finds, per kind, then runs check() on the scalar tags of SCALAR_TAGS
that have a metrics.jsonl counterpart; exits 1 when a check fails. Needs the tensorboard package
(pip install tensorboard). Not a pytest file by name: a test imports check() from it.
"""
import json
import math
import struct
import sys

# Scalar tag -> (the metrics.jsonl "event" whose line holds it, its key there). The value is
# compared at the line's "step".
SCALAR_TAGS = {
    "train/loss": ("train", "loss"),
    "train/learning_rate": ("train", "learning_rate"),
    "train/target_tokens_per_second": ("train", "target_tokens_per_second"),
    "train/gradient_norm": ("train", "gradient_norm"),
    "dev/loss": ("validation", "dev_loss"),
    "dev/perplexity": ("validation", "dev_perplexity"),
    "dev/bleu": ("validation", "dev_bleu"),
    "dev/chrf": ("validation", "dev_chrf"),
}

USAGE = "usage: tests/python/tensorboard_check.py EVENTS_DIR METRICS_JSONL"
RELATIVE_TOLERANCE = 1e-4
# Below this a value counts as zero (a BLEU of 0 after a few steps).
ABSOLUTE_TOLERANCE = 1e-6


def load(events_dir):
    """An EventAccumulator holding every event of the directory (size guidance 0: keep all)."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    size_guidance = {kind: 0 for kind in event_accumulator.DEFAULT_SIZE_GUIDANCE}
    accumulator = EventAccumulator(str(events_dir), size_guidance=size_guidance)
    accumulator.Reload()
    return accumulator


def tags_by_kind(accumulator):
    """{kind: sorted tags} for the kinds that hold any (graph flags left out)."""
    return {kind: sorted(tags) for kind, tags in accumulator.Tags().items() if isinstance(tags, list) and tags}


def read_metrics(metrics_jsonl):
    with open(metrics_jsonl, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def as_float32(value):
    """`value` as TensorBoard stores a scalar (Summary.Value.simple_value is a float32)."""
    if value is None:  # nlohmann::json writes a non-finite number as null
        return math.nan
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def same_value(expected, actual):
    expected = as_float32(expected)
    if not math.isfinite(expected) or not math.isfinite(actual):
        return (math.isnan(expected) and math.isnan(actual)) or expected == actual
    return math.isclose(expected, actual, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE)


def check(events_dir, metrics_jsonl, expected_scalar_tags, events=("validation",)):
    """Asserts that every tag of `expected_scalar_tags` is a scalar series of `events_dir`, and that
    for every metrics.jsonl line whose "event" is in `events` each expected tag mapped to that
    event (SCALAR_TAGS) has a value at the line's step within RELATIVE_TOLERANCE of the line's.
    Where a step repeats (a resumed run), the last line and the last event at it are compared."""
    accumulator = load(events_dir)
    scalar_tags = set(accumulator.Tags()["scalars"])
    missing = [tag for tag in expected_scalar_tags if tag not in scalar_tags]
    assert not missing, f"{events_dir}: no scalar series {missing}; it has {sorted(scalar_tags)}"

    lines = read_metrics(metrics_jsonl)
    compared = 0
    for tag in expected_scalar_tags:
        source = SCALAR_TAGS.get(tag)
        if source is None or source[0] not in events:
            continue
        event_kind, key = source
        by_step = {scalar.step: scalar.value for scalar in accumulator.Scalars(tag)}
        expected = {line["step"]: line[key] for line in lines if line.get("event") == event_kind and key in line}
        for step, value in sorted(expected.items()):
            assert step in by_step, f"{tag}: no value at step {step}, where {metrics_jsonl} has {key} = {value}"
            assert same_value(value, by_step[step]), (
                f"{tag} at step {step}: TensorBoard has {by_step[step]}, {metrics_jsonl} has {key} = {value}"
            )
            compared += 1
    return compared


def main(arguments):
    if len(arguments) != 2:
        sys.exit(USAGE)
    events_dir, metrics_jsonl = arguments
    for kind, tags in tags_by_kind(load(events_dir)).items():
        print(f"{kind}: {', '.join(tags)}")
    checked = [tag for tag, source in SCALAR_TAGS.items() if source is not None]
    try:
        compared = check(events_dir, metrics_jsonl, checked, events=("train", "validation"))
    except AssertionError as error:
        sys.exit(f"tensorboard_check: {error}")
    print(f"{compared} values of {len(checked)} scalar series match {metrics_jsonl}")


if __name__ == "__main__":
    main(sys.argv[1:])
