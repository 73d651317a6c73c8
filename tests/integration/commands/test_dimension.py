"""``isoscope dimension`` as a user runs it: the JSON schema on a tiny decoder and a tiny encoder,
a direction file, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.clirun import one_line_error, run_backend


def _run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_backend("dimension", *args, cache_dir=cache_dir)


@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_bert_dir"])
def test_schema(request, fixture, three_texts, tmp_path):
    model = request.getfixturevalue(fixture)
    out = tmp_path / "card.json"
    proc = _run(
        "--model", str(model), "--texts", str(three_texts), "--state", "1", "--dim", "3",
        "--ablation-texts", "2", "--controls", "1", "--out", str(out), "--device", "cpu",
        cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert {"top_tokens", "contributions", "sum_check", "readers", "ablation", "qk_share"} <= set(
        data
    )
    assert {"text", "position", "token", "value"} <= set(data["top_tokens"][0])
    for row in data["contributions"]:
        assert {"layer", "component", "mean", "first_position", "other_positions"} <= set(row)
        assert "head" in row or row["component"] != "attention head"
    assert data["sum_check"] <= 1e-4 * max(1.0, data["value_scale"])
    assert data["is_decoder"] == (fixture == "tiny_gpt2_dir")
    if data["is_decoder"]:
        assert {"promotes", "suppresses"} <= set(data["logit_effect"])
    assert data["ablation"]["texts"] == 2


def test_direction_file(tiny_bert_dir, three_texts, tmp_path):
    u = tmp_path / "u.npy"
    np.save(u, np.ones(32))
    out = tmp_path / "card.json"
    proc = _run(
        "--model", str(tiny_bert_dir), "--texts", str(three_texts), "--state", "emb",
        "--direction", str(u), "--offset", "1.5", "--ablation-texts", "0", "--out", str(out),
        "--device", "cpu", cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["dim"] is None and data["offset"] == 1.5 and data["ablation"] is None


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--state", "9", "--dim", "3"), "state"),
        (("--state", "1", "--dim", "999"), "dimension 999"),
        (("--state", "1", "--direction", "missing.npy"), "npy"),
        (("--state", "1", "--dim", "3", "--top-k", "0"), "top k"),
    ],
)
def test_bad_input_is_one_line(tiny_bert_dir, three_texts, tmp_path, extra, needle):
    proc = _run(
        "--model", str(tiny_bert_dir), "--texts", str(three_texts), *extra,
        "--ablation-texts", "0", "--out", str(tmp_path / "x.json"), "--device", "cpu",
        cache_dir=tmp_path,
    )  # fmt: skip
    one_line_error(proc, needle)
