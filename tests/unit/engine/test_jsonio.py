"""strict_json is the one JSON writer: NaN and inf become null, and every JSON text the backend writes
for a user (CLI outputs, the report, exports, outlier downloads, saved analyses) goes through it, so a
parser that refuses the bare NaN token reads every file."""

from __future__ import annotations

import ast
import json
import math
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from isoscope.engine.jsonio import strict_json, to_jsonable

ROOT = Path(__file__).resolve().parents[3]
# json.dumps that is no user-facing JSON text: cache keys and cache metadata (read back by isoscope,
# NaN kept on purpose), Ray rows, the model fingerprint.
INTERNAL = {
    "backend/engine/store/entries.py",
    "backend/engine/load/checkpoints.py",
    "backend/engine/extraction/ray_plan.py",
    "backend/analysis/compare/storage.py",
    "backend/analysis/compare/comparison.py",
    "backend/engine/jsonio.py",
}


def _refuse(token: str):
    raise ValueError(f"not JSON: {token}")


def parse(text: str | bytes):
    return json.loads(text, parse_constant=_refuse)


def test_nan_and_inf_become_null_and_numpy_becomes_python():
    text = strict_json({"a": float("nan"), "b": [np.float32(1.5), np.inf], "c": np.arange(2)})
    assert parse(text) == {"a": None, "b": [1.5, None], "c": [0, 1]}


def test_only_strict_json_writes_json_for_users():
    offenders = []
    for path in (ROOT / "backend").rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        if rel in INTERNAL:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("dumps", "dump")
                and getattr(node.func.value, "id", None) == "json"
            ):
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []


def test_a_saved_analysis_with_nan_is_strict_json(tmp_path):
    from isoscope.engine.store.saved import save_analysis
    from tests.unit.engine.store.test_saved import synthetic_result

    result = replace(synthetic_result(), seconds=float("nan"), extra={"x": float("inf")})
    path = save_analysis(result, tmp_path / "a.isoscope")
    with zipfile.ZipFile(path) as zf:
        texts = [parse(zf.read(n)) for n in zf.namelist() if n.endswith(".json")]
    (manifest,) = [t for t in texts if isinstance(t, dict)]
    assert manifest["result"]["seconds"] is None and manifest["result"]["extra"] == {"x": None}


def test_the_outlier_download_and_the_report_settings_are_strict_json():
    from types import SimpleNamespace

    from isoscope.analysis.outliers import OutlierThresholds
    from isoscope.plots.outliers import outliers_json
    from isoscope.share.report.model import Report, Section
    from isoscope.share.report.render import render_html

    fake = SimpleNamespace(
        model={"source": "m"}, corpus_name="c", num_tokens=3, state_names=["emb"]
    )
    by_state = [{c: [] for c in ("extreme_index", "zscore", "quantile", "variance")}]
    parse(outliers_json(fake, by_state, OutlierThresholds()))
    corpus = {
        "name": "c",
        "num_texts": 1,
        "num_tokens": 1,
        "token_sample": 1,
        "sentence_pairs": 0,
        "sha256": "0",
        "notices": [],
    }
    report = Report(
        {"source": "m"}, corpus, {"report": {"x": float("nan")}}, "v", [Section("k", "t")]
    )
    assert "report.x</td><td>null" in render_html(report)


def _refuse(token: str):
    raise ValueError(token)


def test_nan_and_inf_become_null_everywhere():
    payload = {
        "a": float("nan"),
        "b": [1.0, float("inf"), -float("inf")],
        "c": np.array([0.5, np.nan], dtype=np.float32),
        "d": (np.float64("nan"), np.int64(3)),
        4: {"nested": np.float32(np.inf)},
    }
    text = strict_json(payload)
    parsed = json.loads(text, parse_constant=_refuse)
    assert parsed == {
        "a": None,
        "b": [1.0, None, None],
        "c": [0.5, None],
        "d": [None, 3],
        "4": {"nested": None},
    }


def test_numpy_scalars_and_arrays_become_python_values():
    value = to_jsonable({"x": np.arange(3), "y": np.bool_(True), "z": np.float32(0.25)})
    assert value == {"x": [0, 1, 2], "y": True, "z": 0.25}
    assert type(value["x"][0]) is int and type(value["z"]) is float


def test_plain_json_dumps_would_have_written_nan():
    """The reason for the helper: the standard library writes a bare NaN token."""
    assert "NaN" in json.dumps({"a": math.nan})
    with pytest.raises(ValueError):
        json.loads(json.dumps({"a": math.nan}), parse_constant=_refuse)
    assert "NaN" not in strict_json({"a": math.nan})


def test_dumps_options_pass_through():
    assert strict_json({"b": 1, "a": 2}, sort_keys=True, indent=1) == '{\n "a": 2,\n "b": 1\n}'
