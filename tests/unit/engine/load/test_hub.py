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


def _snapshot(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x")


@pytest.mark.parametrize(
    "planted", ["../../../outside", "/abs/outside", "not-a-sha", "main\n../x", ""]
)
def test_a_planted_ref_file_never_leads_outside_the_cache(tmp_path, monkeypatch, planted):
    """A ref file must hold a commit sha; anything else is no cached snapshot, not a path."""
    from isoscope.engine.load import hub
    from isoscope.engine.load.source import parse_source

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    _snapshot(tmp_path / "outside")
    _snapshot(tmp_path / "abs" / "outside")
    refs = tmp_path / "hub" / "models--org--name" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(planted)
    assert hub.cached_snapshot(parse_source("org/name")) is None


def test_a_snapshot_symlinked_outside_the_cache_is_refused(tmp_path, monkeypatch):
    from isoscope.engine.errors import ModelLoadError
    from isoscope.engine.load import hub
    from isoscope.engine.load.source import parse_source

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    sha = "a" * 40
    _snapshot(tmp_path / "elsewhere")
    snapshots = tmp_path / "hub" / "models--org--name" / "snapshots"
    snapshots.mkdir(parents=True)
    (snapshots / sha).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ModelLoadError, match="leads outside the cache"):
        hub.cached_snapshot(parse_source(f"org/name@{sha}"))
    _snapshot(snapshots / ("b" * 40))  # a real snapshot inside the cache is found
    assert hub.cached_snapshot(parse_source(f"org/name@{'b' * 40}")) == snapshots / ("b" * 40)


@pytest.mark.parametrize("revision", ["/etc", "../../x", ".."])
def test_the_cache_lookup_refuses_a_revision_that_is_a_path_even_if_built_by_hand(
    tmp_path, monkeypatch, revision
):
    """A ModelSource made without the parse still cannot point the lookup at a folder."""
    from isoscope.engine.errors import ModelLoadError
    from isoscope.engine.load import hub
    from isoscope.engine.load.source import ModelSource

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    source = ModelSource("hub", f"org/name@{revision}", repo_id="org/name", revision=revision)
    with pytest.raises(ModelLoadError, match="is not a branch, tag or commit"):
        hub.cached_snapshot(source)
