"""A checkpoint is a safetensors file: the safetensors package reads its weights, vocabularies and
metadata without nmt. Skipped where the package is not installed (scripts/python_package.sh installs
it from PyPI and runs this)."""

import numpy as np
import pytest


def test_safetensors_reads_our_checkpoint(model_dir, run_nmt, tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open

    checkpoint = model_dir / "best.ckpt"
    tensors = safetensors_numpy.load_file(str(checkpoint))
    with safe_open(str(checkpoint), framework="numpy") as opened:
        metadata = opened.metadata()
    assert metadata["format"] == "nmt-rnn-checkpoint"
    assert metadata["version"] == "2"
    config = bytes(tensors["nmt.config"]).decode("utf-8")
    assert "decoder-hidden-size\t32\n" in config
    # The sentencepiece model as nmt train wrote it beside the checkpoint.
    assert bytes(tensors["nmt.source_vocabulary"]) == (model_dir / "vocab.joint.model").read_bytes()
    embedding = tensors["model.encoder.embedding.weight"]
    assert embedding.dtype == np.float32 and embedding.shape[1] == 32
    assert np.isfinite(embedding).all() and np.abs(embedding).sum() > 0

    # An int8 export: int8 rows and a float32 scale for each.
    exported = tmp_path / "model.int8"
    run_nmt("export", "--model", model_dir, "--output", exported)
    int8 = safetensors_numpy.load_file(str(exported))
    values = int8["model.encoder.embedding.weight.int8_values"]
    scales = int8["model.encoder.embedding.weight.int8_scales"]
    assert values.dtype == np.int8 and scales.dtype == np.float32 and values.shape == embedding.shape
    assert np.abs(values.astype(np.float32) * scales[:, None] - embedding).max() <= scales.max()
