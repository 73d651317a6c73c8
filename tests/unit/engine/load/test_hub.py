"""Which Hub files are fetched, when a cached snapshot is complete, and the progress report."""

from __future__ import annotations

import json

import pytest

from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.hub import DownloadMeter, files_to_fetch, snapshot_complete

pytestmark = pytest.mark.unit


def test_only_what_the_loader_reads_config_first():
    files = {
        "README.md": 10,
        "config.json": 1,
        "model-00002-of-00002.safetensors": 5,
        "model-00001-of-00002.safetensors": 5,
        "model.safetensors.index.json": 1,
        "pytorch_model.bin": 9,
        "modeling_custom.py": 1,
        "tokenizer.json": 2,
        "spiece.model": 2,
        "onnx/model.onnx": 9,
        "training_args.bin": 1,
    }
    assert files_to_fetch(files, "o/r", allow_pickle=True) == [
        "config.json",
        "spiece.model",
        "tokenizer.json",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]


def test_pickle_weights_only_with_the_opt_in():
    files = {"config.json": 1, "pytorch_model.bin": 9, "vocab.txt": 1}
    with pytest.raises(ModelLoadError, match="only pickle weights"):
        files_to_fetch(files, "o/r", allow_pickle=False)
    assert files_to_fetch(files, "o/r", allow_pickle=True)[-1] == "pytorch_model.bin"
    with pytest.raises(ModelLoadError, match="no safetensors weights"):
        files_to_fetch({"config.json": 1, "model.onnx": 3}, "o/r", allow_pickle=True)
    with pytest.raises(ModelLoadError, match="no config.json"):
        files_to_fetch({"model.safetensors": 3}, "o/r", allow_pickle=False)


def test_a_snapshot_is_complete_only_with_every_shard(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert not snapshot_complete(tmp_path)
    index = {"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "s1.safetensors").write_bytes(b"x")
    assert not snapshot_complete(tmp_path)
    (tmp_path / "s2.safetensors").write_bytes(b"x")
    assert snapshot_complete(tmp_path)


def test_the_meter_reports_an_eta_from_the_mean_rate():
    now = [100.0]
    meter = DownloadMeter(clock=lambda: now[0])
    assert meter.eta_s(0, 10) is None
    now[0] = 105.0
    assert meter.eta_s(25_000_000, 100_000_000) == pytest.approx(15.0)
    assert meter.describe(25_000_000, 100_000_000) == (
        "25.0 of 100.0 MB, 5.0 MB/s, about 15 s left"
    )
