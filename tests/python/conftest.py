"""Fixtures of the Python module's tests: the nmt command of the same build (NMT_BINARY, set by
CTest), the toy corpus, and a small model trained once per session with the command."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("NMT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
TOY = SOURCE_DIR / "data" / "toy"


def tiny_train_arguments(model_dir, steps=3, validate_every=3):
    """The options of a tiny training run on the toy corpus, as the C++ tests' tiny_train_arguments."""
    return {
        "train_source": str(TOY / "train.src"),
        "train_target": str(TOY / "train.tgt"),
        "dev_source": str(TOY / "dev.src"),
        "dev_target": str(TOY / "dev.tgt"),
        "model_dir": str(model_dir),
        "vocab_size": 200,
        "byte_fallback": False,
        "embedding_size": 16,
        "encoder_hidden_size": 8,
        "decoder_hidden_size": 16,
        "attention_size": 8,
        "max_steps": steps,
        "validate_every": validate_every,
        "batch_tokens": 400,
        "threads": 1,
    }


def command_line(options):
    """Keyword options as nmt's command-line arguments."""
    arguments = []
    for key, value in options.items():
        name = "--" + key.replace("_", "-")
        if value is True:
            arguments.append(name)
        else:
            arguments += [name, str(value)]
    return arguments


@pytest.fixture(scope="session")
def nmt_binary():
    binary = os.environ.get("NMT_BINARY")
    if not binary or not Path(binary).exists():
        pytest.fail("NMT_BINARY must name the nmt program of this build (ctest sets it)")
    return binary


@pytest.fixture(scope="session")
def run_nmt(nmt_binary):
    """Runs the nmt command; returns its standard output, and fails the test when it fails."""

    def run(*arguments, check=True):
        result = subprocess.run([nmt_binary, *map(str, arguments)], capture_output=True, text=True)
        if check and result.returncode != 0:
            pytest.fail(f"nmt {' '.join(map(str, arguments))} failed: {result.stderr}")
        return result

    return run


@pytest.fixture(scope="session")
def toy():
    return TOY


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, run_nmt):
    """A model trained enough (600 updates, seconds) that its outputs differ from sentence to sentence."""
    directory = tmp_path_factory.mktemp("model") / "toy"
    options = tiny_train_arguments(directory, steps=600, validate_every=600)
    options.update(embedding_size=32, encoder_hidden_size=32, decoder_hidden_size=32, attention_size=16,
                   batch_tokens=1000, learning_rate=0.01)
    run_nmt("train", *command_line(options))
    return directory


@pytest.fixture(scope="session")
def test_lines():
    return (TOY / "test.src").read_text(encoding="utf-8").splitlines()[:120]


@pytest.fixture(scope="session")
def translator(model_dir):
    import nmt

    return nmt.Translator(str(model_dir), threads=2)


def python_script(code, *arguments):
    """A child Python with this module on its path, running `code`."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
