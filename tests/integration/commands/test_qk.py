"""``isoscope qk`` as a user runs it: the JSON schema on a tiny grouped-query Llama, the rotation
toggle, and bad input (one line on stderr, exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.clirun import argv_over, one_line_error, run_backend

METRICS = {"mean_q_norm", "mean_k_norm", "cos_qk", "entropy", "entropy_norm"}


def _run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_backend("qk", *args, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def texts(three_texts) -> Path:
    return three_texts


def _qk(model: Path, texts: Path, out: Path, *extra: str, cache_dir: Path) -> dict:
    proc = _run(
        "--model", str(model), "--texts", str(texts), "--out", str(out), "--device", "cpu",
        "--max-length", "16", *extra, cache_dir=cache_dir,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_qk_json_per_query_head_with_its_kv_head(tiny_llama_dir, texts, tmp_path):
    applied = _qk(tiny_llama_dir, texts, tmp_path / "a.json", cache_dir=tmp_path)
    before = _qk(
        tiny_llama_dir, texts, tmp_path / "b.json", "--rotation", "before", cache_dir=tmp_path
    )
    assert {"model", "corpus", "settings", "heads"} <= set(applied)
    settings = applied["settings"]
    assert settings["rotation"] == "applied" and before["settings"]["rotation"] == "before"
    assert (settings["num_heads"], settings["num_kv_heads"]) == (4, 2)
    assert "causal" in settings["mask"]
    heads = applied["heads"]
    assert [(h["layer"], h["head"]) for h in heads] == [(i, j) for i in (1, 2) for j in range(4)]
    assert [h["kv_head"] for h in heads[:4]] == [0, 0, 1, 1]
    for h in heads:
        assert set(h) == {"layer", "head", "kv_head"} | METRICS
        assert -1 <= h["cos_qk"] <= 1 and 0 < h["entropy_norm"] <= 1 + 1e-9
    assert applied["corpus"]["texts"] == 3 and applied["corpus"]["tokens"] > 3
    # the toggle moves the vectors, never the attention
    assert [h["entropy"] for h in heads] == pytest.approx([h["entropy"] for h in before["heads"]])
    assert [h["mean_q_norm"] for h in heads] != [h["mean_q_norm"] for h in before["heads"]]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--texts", "missing.txt"), "missing.txt"),
        (("--max-length", "1"), "--max-length"),
        (("--rotation", "sideways"), "--rotation"),
        (("--batch-size", "0"), "--batch-size"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle, texts, tiny_llama_dir, tmp_path):
    base = {
        "--texts": str(texts),
        "--model": str(tiny_llama_dir),
        "--out": str(tmp_path / "o.json"),
    }
    one_line_error(_run(*argv_over(base, args), cache_dir=tmp_path), needle)


def test_a_model_without_per_layer_modules_is_refused_in_one_line(texts, tmp_path):
    from tests import zoo

    albert = zoo.build("albert", tmp_path / "albert")  # one layer module shared by all layers
    proc = _run(
        "--model", str(albert), "--texts", str(texts), "--out", str(tmp_path / "o.json"),
        cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: the queries/keys view") and "shares one layer module" in line
