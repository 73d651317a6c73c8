"""`isoscope analyze` reports IsoScore, clipped anisotropy, cosine histograms and Timkey's top dims."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli-iso") / "texts.txt"
    lines = [
        f"Text number {i} talks about the bank, the river and {i * 7} boats." for i in range(12)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_analyze_json_has_the_isotropy_keys(run_analyze, tiny_bert_dir, texts_file, tmp_path):
    out = tmp_path / "out.json"
    proc = run_analyze(
        "--model",
        str(tiny_bert_dir),
        "--texts",
        str(texts_file),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--n-pairs",
        "500",
        "--histogram-bins",
        "20",
        "--top-dims",
        "3",
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["corpus"]["sample_size"] >= 32  # enough points for IsoScore in 32 dims
    for layer in report["layers"]:
        assert 0.0 <= layer["isoscore"] <= 1.0
        assert -1.0 <= layer["anisotropy_clipped"] <= 1.0
        if not layer["outlier_dims"]:
            assert layer["anisotropy_clipped"] == pytest.approx(layer["anisotropy"])
        hist = layer["cosine_histogram"]
        np.testing.assert_allclose(hist["edges"], np.linspace(-1, 1, 21))
        assert len(hist["counts"]) == 20 and sum(hist["counts"]) == 500
        # the histogram's mean (from bin centres) agrees with the anisotropy to within half a bin
        centres = (np.array(hist["edges"][1:]) + np.array(hist["edges"][:-1])) / 2
        assert abs(np.dot(centres, hist["counts"]) / 500 - layer["anisotropy"]) <= 0.05 + 1e-9
        top = layer["top_cosine_dims"]
        assert len(top) == 3
        assert all(isinstance(d, int) and 0 <= d < 32 and isinstance(s, float) for d, s in top)


def test_analyze_rejects_a_bad_bin_count(run_analyze, tiny_bert_dir, texts_file, tmp_path):
    proc = run_analyze(
        "--model",
        str(tiny_bert_dir),
        "--texts",
        str(texts_file),
        "--out",
        str(tmp_path / "o.json"),
        "--histogram-bins",
        "0",
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--histogram-bins" in proc.stderr


def test_build_report_on_minilm(minilm_result):
    from isoscope.commands.analyze import build_report

    report = build_report(minilm_result)
    layers = report["layers"]
    assert len(layers) == 7
    for layer in layers[1:-1]:  # middle layers have outlier dims that carry the cosine
        assert layer["outlier_dims"]
        assert layer["anisotropy_clipped"] < layer["anisotropy"]
        assert layer["top_cosine_dims"][0][0] in layer["outlier_dims"]
    assert all(0 < layer["isoscore"] < 1 for layer in layers)
