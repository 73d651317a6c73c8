"""The README is a user's guide (its quick start, the models a user brings, its notebook example
run as written on the bundled model and corpus, with the pages' own figure builders); the rest of
the documentation lives in docs/ (tests/unit/test_docs.py checks its links)."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.graph_objects as go

ROOT = Path(__file__).resolve().parents[2]


def _example() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(
        r"<!-- notebook example -->\s*```python\n(.*?)```\s*<!-- end notebook example -->",
        text,
        re.S,
    )
    assert match, "README.md lost its notebook example"
    return match.group(1)


def test_the_readme_notebook_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_example(), "README.md", "exec"), namespace)  # noqa: S102 - our own README
    result = namespace["result"]
    assert result.num_states == 7
    assert isinstance(namespace["heatmap"], go.Figure) and isinstance(namespace["lines"], go.Figure)
    assert (tmp_path / "outliers.html").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert (
        "emb" in printed and "223" in printed
    )  # MiniLM's outlier dim at state 5 (docs/methods.md)


def test_the_api_names_resolve_lazily():
    import isoscope

    for name in backend.API:
        assert getattr(backend, name) is not None, name
    assert "load_model" in dir(backend)


def test_the_readme_is_a_short_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 350
    quick_start = text.split("## Quick start")[1].split("\n## ")[0]
    assert "make run" in quick_start and "make test" in quick_start
    models = text.split("## Models")[1].split("\n## ")[0]
    for source in ("default", "smollm2", "folder", "Hub id", ".gguf", "random:", "HF_TOKEN"):
        assert source in models, source
    longest_cell = max(
        len(c) for line in text.splitlines() if line.startswith("|") for c in line.split("|")
    )
    assert longest_cell <= 200
