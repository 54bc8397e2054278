"""nmt train's TensorBoard events read back by TensorBoard's own loader (EventAccumulator): every
scalar, image and text tag of a short run and of its resume, each value equal to metrics.jsonl's."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install tensorboard)")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tensorboard_check  # noqa: E402  (beside this file)
from conftest import command_line, tiny_train_arguments  # noqa: E402


def test_a_run_and_its_resume_give_every_tag_at_every_step_once(tmp_path, run_nmt):
    model = tmp_path / "model"
    options = tiny_train_arguments(model, steps=40, validate_every=20)
    options["log_every"] = 10
    run_nmt("train", *command_line(options))
    options["max_steps"] = 60
    run_nmt("train", *command_line(options), "--resume")

    events = model / "tensorboard"
    assert len(list(events.glob("events.out.tfevents.*"))) == 2  # one file a run
    tags = list(tensorboard_check.SCALAR_TAGS)
    compared = tensorboard_check.check(events, model / "metrics.jsonl", tags, events=("train", "validation"))
    assert compared == 6 * 4 + 3 * 4  # train lines at 10..60, validations at 20, 40, 60

    accumulator = tensorboard_check.load(events)
    for tag in tags:
        steps = [scalar.step for scalar in accumulator.Scalars(tag)]
        assert steps == sorted(set(steps)), f"{tag}: a step twice or out of order: {steps}"
    images = accumulator.Tags()["images"]
    assert sorted(images) == [f"attention/dev_sentence_{i}" for i in range(1, 5)]
    for tag in images:
        shown = accumulator.Images(tag)
        assert [image.step for image in shown] == [20, 40, 60]
        assert all(image.encoded_image_string.startswith(b"\x89PNG") and image.width > 0 for image in shown)
    texts = accumulator.Tags()["tensors"]
    assert sorted(texts) == [f"translation/dev_sentence_{i}" for i in range(1, 5)]
    for tag in texts:
        shown = accumulator.Tensors(tag)
        assert [event.step for event in shown] == [20, 40, 60]
        assert b"**source:**" in shown[0].tensor_proto.string_val[0]
