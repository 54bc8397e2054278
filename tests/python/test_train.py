"""nmt.train against nmt train: the same run, files and checks; progress on Python's logging."""

import json
import logging

import pytest

import nmt
from conftest import command_line, tiny_train_arguments


def losses(model_dir):
    lines = (model_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines if json.loads(line)["event"] == "train"]


def test_training_from_python_writes_what_the_command_writes(run_nmt, tmp_path, caplog):
    command_dir, python_dir = tmp_path / "command", tmp_path / "python"
    options = dict(tiny_train_arguments(command_dir, steps=6, validate_every=3), log_every=2)
    run_nmt("train", *command_line(options))
    config = tmp_path / "run.toml"
    config.write_text("[train]\nvocab-size = 200\nbyte-fallback = false\nbatch-tokens = 400\n")
    overrides = {k: v for k, v in options.items() if k not in ("vocab_size", "byte_fallback", "batch_tokens")}
    overrides["model_dir"] = python_dir
    with caplog.at_level(logging.INFO, logger="nmt"):
        assert nmt.train(config=config, **overrides) == str(python_dir)
    made = lambda d: sorted(p.name for p in d.iterdir() if not p.name.endswith(".lock"))
    assert made(python_dir) == made(command_dir)
    strip = lambda d: [l for l in (d / "config.toml").read_text().splitlines() if "model-dir" not in l]
    assert strip(python_dir) == strip(command_dir)
    assert losses(python_dir) == losses(command_dir) and len(losses(python_dir)) == 3
    assert any(r.name == "nmt.train" and " loss " in r.getMessage() for r in caplog.records)
    assert "done: max-steps reached after 6 steps" in (python_dir / "train.log").read_text()


def test_training_errors_are_python_exceptions(tmp_path):
    options = tiny_train_arguments(tmp_path / "model")
    with pytest.raises(TypeError, match="unexpected keyword argument 'vocab'"):
        nmt.train(**options, vocab=10)
    with pytest.raises(TypeError, match="nproc starts or joins several processes"):
        nmt.train(**options, nproc=2)
    with pytest.raises(ValueError, match="vocab-size"):
        nmt.train(**dict(options, vocab_size="many"))
    with pytest.raises(FileNotFoundError, match="configuration file not found"):
        nmt.train(config=tmp_path / "missing.toml", **options)
    with pytest.raises(FileNotFoundError, match="missing.src"):
        nmt.train(**dict(options, train_source=str(tmp_path / "missing.src")))
    # overwrite=False is no flag at all: only the resume's own error, no clash of the two flags.
    with pytest.raises(ValueError, match="--resume: .*last.ckpt does not exist"):
        nmt.train(**options, resume=True, overwrite=False)
    bad = tmp_path / "bad.toml"
    bad.write_text("[train]\nvocab-size = 200\nvocab-size = 300\n")
    with pytest.raises(ValueError):
        nmt.train(config=bad, **options)
