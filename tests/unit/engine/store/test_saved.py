"""Saved analyses: a synthetic ExtractionResult survives zip and folder round trips bit for bit;
newer format versions, foreign files and damaged files are refused with actionable errors."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile

import numpy as np
import pytest

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings, TokenTable
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.store.saved import (
    FORMAT_VERSION,
    CorruptSavedAnalysisError,
    NewerSavedFormatError,
    SavedAnalysisError,
    load_saved,
    looks_saved,
    read_saved_bytes,
    save_analysis,
)


def synthetic_result(seed: int = 0, states: int = 3, d: int = 8, k: int = 5) -> ExtractionResult:
    rng = np.random.default_rng(seed)
    texts = ("first text", "a second text, with a comma", "nötig ünïcode ✓")
    counts = [3, 4, 2]
    n = sum(counts)
    tokens = TokenTable(
        text_id=np.repeat(np.arange(3), counts).astype(np.int32),
        position=np.concatenate([np.arange(c) for c in counts]).astype(np.int32),
        token=np.array(["[CLS]", "first", "text", "[CLS]", "a", ",", "##x", "ü", "✓"]),
        word_id=np.array([-1, 0, 1, -1, 0, 1, 1, 0, 1], dtype=np.int32),
        is_special=np.array([1, 0, 0, 1, 0, 0, 0, 0, 0], dtype=bool),
        is_punct=np.array([0, 0, 0, 0, 0, 1, 0, 0, 1], dtype=bool),
    )
    stats = rng.normal(size=(5, states, d))
    return ExtractionResult(
        model={"source": "random:bert", "display_name": "tiny", "num_layers": states - 1},
        model_fingerprint="abc123-float32",
        corpus_name="planted.txt",
        corpus_sha=Corpus(texts, "x").sha,
        texts=texts,
        notices=("a notice", "another"),
        settings=ExtractionSettings(max_length=16, sample_size=5, seed=3),
        mean=stats[0],
        variance=np.abs(stats[1]),
        min=stats[2] - 5,
        max=stats[3] + 5,
        mean_abs=np.abs(stats[4]),
        argmin_count=rng.integers(0, n, size=(states, d)),
        argmax_count=rng.integers(0, n, size=(states, d)),
        sample_vectors=rng.normal(size=(states, k, d)).astype(np.float32),
        sample_index=np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64),
        tokens=tokens,
        seconds=1.25,
        extra={"engine": "local", "workers": 1},
    )


def assert_same_result(a: ExtractionResult, b: ExtractionResult) -> None:
    for f in dataclasses.fields(ExtractionResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        elif isinstance(x, TokenTable):
            for g in dataclasses.fields(TokenTable):
                np.testing.assert_array_equal(getattr(x, g.name), getattr(y, g.name))
                assert getattr(x, g.name).dtype.kind == getattr(y, g.name).dtype.kind
        else:
            assert x == y, f.name


@pytest.mark.parametrize("folder", [False, True])
def test_round_trip_is_exact(tmp_path, folder):
    result = synthetic_result()
    path = save_analysis(result, tmp_path / ("run" if folder else "run.isoscope"), folder=folder)
    assert path.is_dir() == folder and looks_saved(path)
    assert_same_result(result, load_saved(path))


def test_zip_holds_json_and_npz_only(tmp_path):
    path = save_analysis(synthetic_result(), tmp_path / "run.isoscope")
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["arrays.npz", "manifest.json", "texts.json"]
        manifest = json.loads(zf.read("manifest.json"))
        arrays = np.load(io.BytesIO(zf.read("arrays.npz")), allow_pickle=False)
        assert "tok_token" in arrays.files and arrays["mean"].dtype == np.float64
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["result"]["model"]["source"] == "random:bert"
    assert manifest["settings"]["seed"] == 3


def test_upload_bytes_round_trip(tmp_path):
    result = synthetic_result(seed=4)
    path = save_analysis(result, tmp_path / "run.isoscope")
    assert_same_result(result, read_saved_bytes(path.read_bytes(), "run.isoscope"))


def _rewrite(path, member: str, data: bytes):
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    files[member] = data
    with zipfile.ZipFile(path, "w") as zf:
        for n, content in files.items():
            zf.writestr(n, content)


def test_newer_format_version_is_refused_with_update_advice(tmp_path):
    path = save_analysis(synthetic_result(), tmp_path / "run.isoscope")
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    manifest["format_version"] = FORMAT_VERSION + 1
    manifest["written_by"] = "isoscope 9.0"
    _rewrite(path, "manifest.json", json.dumps(manifest).encode())
    with pytest.raises(NewerSavedFormatError, match="isoscope 9.0.*format 2.*update isoscope"):
        load_saved(path)


def test_flipped_byte_in_arrays_is_reported_as_damaged(tmp_path):
    path = save_analysis(synthetic_result(), tmp_path / "run.isoscope")
    with zipfile.ZipFile(path) as zf:
        raw = bytearray(zf.read("arrays.npz"))
    raw[len(raw) // 2] ^= 0xFF
    _rewrite(path, "arrays.npz", bytes(raw))
    with pytest.raises(CorruptSavedAnalysisError, match="damaged .*arrays.npz.*checksum"):
        load_saved(path)


def test_truncated_file_is_reported_as_damaged(tmp_path):
    path = save_analysis(synthetic_result(), tmp_path / "run.isoscope")
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CorruptSavedAnalysisError, match="not a readable zip"):
        load_saved(path)


def test_foreign_zip_and_text_file_are_not_saved_analyses(tmp_path):
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(CorruptSavedAnalysisError, match="no manifest.json inside"):
        load_saved(other)
    text = tmp_path / "notes.isoscope"
    text.write_text("just text")
    with pytest.raises(CorruptSavedAnalysisError):
        load_saved(text)
    wrong = tmp_path / "wrong.isoscope"
    save_analysis(synthetic_result(), wrong)
    _rewrite(wrong, "manifest.json", json.dumps({"format": "something-else"}).encode())
    with pytest.raises(CorruptSavedAnalysisError, match="not an isoscope saved analysis"):
        load_saved(wrong)


def test_inconsistent_contents_with_valid_checksums_are_refused(tmp_path):
    result = synthetic_result()
    bad = dataclasses.replace(result, sample_index=np.array([0, 1, 2, 3, 99]))
    path = save_analysis(bad, tmp_path / "bad.isoscope")
    with pytest.raises(CorruptSavedAnalysisError, match="sample index points outside"):
        load_saved(path)
    tampered = dataclasses.replace(result, texts=("other", "texts", "here"))
    path = save_analysis(tampered, tmp_path / "tampered.isoscope")
    with pytest.raises(CorruptSavedAnalysisError, match="corpus hash"):
        load_saved(path)


def test_missing_path_and_incomplete_folder(tmp_path):
    with pytest.raises(SavedAnalysisError, match="does not exist"):
        load_saved(tmp_path / "nope.isoscope")
    folder = save_analysis(synthetic_result(), tmp_path / "run", folder=True)
    (folder / "texts.json").unlink()
    with pytest.raises(CorruptSavedAnalysisError, match="no texts.json"):
        load_saved(folder)


def test_errors_are_isoscope_errors_and_save_refuses_bad_targets(tmp_path):
    assert issubclass(CorruptSavedAnalysisError, IsoscopeError)
    assert issubclass(NewerSavedFormatError, IsoscopeError)
    with pytest.raises(IsoscopeError, match="does not exist"):
        save_analysis(synthetic_result(), tmp_path / "missing" / "run.isoscope")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("user data")
    with pytest.raises(IsoscopeError, match="not empty"):
        save_analysis(synthetic_result(), busy)
    assert (busy / "keep.txt").read_text() == "user data"
