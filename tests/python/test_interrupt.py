"""Ctrl-C (SIGINT) in Python stops a translation and a training run while C++ works, instead of
after the work is done."""

import os
import signal
import time

from conftest import python_script, tiny_train_arguments

TRANSLATE = """
import sys, nmt
translator = nmt.Translator(sys.argv[1], threads=1)
lines = open(sys.argv[2], encoding="utf-8").read().splitlines() * 400   # minutes of beam search
print("ready", flush=True)
try:
    translator.translate_batch(lines, beam_size=8, batch_size=8)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""

TRAIN = """
import json, sys, nmt
try:
    nmt.train(**json.loads(sys.argv[1]))
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def cpu_seconds(pid):
    """The CPU time, user and system, that process `pid` has used (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()  # after the command's name, from the state on
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(child, after_line, within):
    """Waits for `after_line` on the child's output, then until the child has worked for a while
    (0.3 s of CPU time since: in C++, where the signal must find it, not in the Python before the
    call), sends SIGINT, and returns its output; fails unless the child ends within `within`
    seconds, far less than its work would take."""
    assert child.stdout.readline().strip() == after_line
    start = cpu_seconds(child.pid)
    deadline = time.monotonic() + 60
    while cpu_seconds(child.pid) - start < 0.3:
        assert time.monotonic() < deadline and child.poll() is None, "the work did not start"
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    try:
        output, errors = child.communicate(timeout=within)
    except Exception:
        child.kill()
        raise AssertionError(f"the child did not stop within {within} s of SIGINT")
    return output, errors


def test_ctrl_c_stops_a_translation(model_dir, toy):
    child = python_script(TRANSLATE, model_dir, toy / "test.src")
    output, errors = stop(child, "ready", within=20)  # the whole translation takes minutes
    assert output.strip() == "interrupted", errors


def test_ctrl_c_stops_training_with_last_checkpoint(tmp_path):
    import json

    import nmt

    model = tmp_path / "run"
    options = tiny_train_arguments(model, steps=1000000, validate_every=1000000)
    child = python_script("print('ready', flush=True)\n" + TRAIN, json.dumps(options))
    deadline = time.time() + 120
    while not (model / "train.log").exists() or " loss " not in (model / "train.log").read_text():
        assert time.time() < deadline and child.poll() is None, "training did not start"
        time.sleep(0.2)
    output, errors = stop(child, "ready", within=30)  # the whole run takes hours
    assert output.strip() == "interrupted", errors
    assert (model / "last.ckpt").exists()
    assert "interrupted" in (model / "train.log").read_text()
    # The run goes on from its last.ckpt (here it is already past max_steps: it ends at once).
    assert nmt.train(**dict(options, max_steps=1, resume=True)) == str(model)
