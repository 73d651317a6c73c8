"""Payload budgets of the heaviest figures: bytes of ``fig.to_json()`` (what Streamlit sends to the
browser on every rerun), so payload bloat shows up in CI. Size, never time (issue 15).

Budgets are the sizes measured on these synthetic inputs with about 10 % headroom; the bundled
MiniLM's real figures are of the same shape (4,000 projected tokens with ±8-token hover contexts of
about 65 characters; 7 hidden states x 384 dims; a 128-token text).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from isoscope.analysis.projections.methods import Colouring, Projection
from isoscope.plots.outliers import layer_dim_heatmap, token_dim_heatmap
from isoscope.plots.projections import before_after_figure

N_POINTS = 4000
HOVER_CHARS = 65


def _projection(rng: np.random.Generator) -> Projection:
    return Projection(rng.normal(size=(N_POINTS, 2)), "pca", 0, 0.0, np.array([0.3, 0.1]))


def _hover(rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    return np.array(
        ["".join(rng.choice(letters, HOVER_CHARS)) for _ in range(N_POINTS)], dtype=object
    )


@pytest.fixture(scope="module")
def projection_inputs():
    rng = np.random.default_rng(0)
    return _projection(rng), _projection(rng), _hover(rng), rng


def _size(fig) -> int:
    return len(fig.to_json())


def test_projection_figure_categorical_budget(projection_inputs):
    before, after, hover, rng = projection_inputs
    order = tuple(f"token {i}" for i in range(12)) + ("other tokens",)
    colouring = Colouring(rng.choice(np.array(order), N_POINTS), "categorical", "token", order)
    fig = before_after_figure(before, after, colouring, hover)
    size = _size(fig)
    hover_bytes = 2 * N_POINTS * (HOVER_CHARS + 3)  # each panel carries the point's label
    assert size <= 740_000, size
    assert size - hover_bytes <= 150_000, "coordinates and layout grew"
    spec = json.loads(fig.to_json())
    # coordinates travel as typed binary float32, not as decimal text of float64
    assert spec["data"][0]["x"]["dtype"] == "f4"


def test_projection_figure_numeric_budget(projection_inputs):
    before, after, hover, rng = projection_inputs
    colouring = Colouring(rng.normal(size=N_POINTS), "numeric", "log10 frequency")
    fig = before_after_figure(before, after, colouring, hover)
    assert _size(fig) <= 850_000, _size(fig)
    spec = json.loads(fig.to_json())
    assert spec["data"][0]["marker"]["color"]["dtype"] == "f4"


def test_layer_dim_heatmap_budget():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(7, 384))
    marks = {"zscore": [[223]] * 7, "extreme_index": [[223, 127]] * 7}
    fig = layer_dim_heatmap(values, ["emb", *map(str, range(1, 7))], "mean", marks=marks)
    assert _size(fig) <= 66_000, _size(fig)


def test_token_heatmap_budget_has_no_per_cell_labels():
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(128, 384))
    tokens = [f"token{i}" for i in range(128)]
    fig = token_dim_heatmap(hidden, tokens, "3", [223])
    assert fig.data[0].customdata is None  # T x d label strings would dominate the payload
    assert _size(fig) <= 750_000, _size(fig)
