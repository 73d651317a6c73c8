"""The four outlier criteria of docs/methods.md section 1 find planted dims and nothing in clean noise;
the figure/table builders of the Outlier dimensions page carry the right data."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from isoscope.analysis.outliers import (
    CRITERIA,
    OutlierThresholds,
    criteria_by_state,
    extreme_index_outliers,
    outlier_dims,
    outlier_dims_by_state,
    outlier_table,
    outliers_by_criterion,
    quantile_outliers,
    strongest_dims,
    variance_outliers,
    zscore_outliers,
)
from isoscope.engine.extraction.stats import RunningStats
from isoscope.plots import outliers as plots


def _freqs(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, d = h.shape
    return np.bincount(h.argmin(axis=1), minlength=d) / n, np.bincount(
        h.argmax(axis=1), minlength=d
    ) / n


@pytest.fixture(scope="module")
def planted() -> np.ndarray:
    """2000 tokens x 256 dims of N(0, 1) with dim 5 shifted to -8 (rogue mean: the min of almost
    every token) and dim 40 given a large variance (std 4, mean 0). As in real models (d >= 384)
    one dim is well under 1 % of all values, so the 0.99-quantile rule can see it."""
    rng = np.random.default_rng(0)
    h = rng.normal(size=(2000, 256))
    h[:, 5] -= 8.0
    h[:, 40] *= 4.0
    return h


@pytest.fixture(scope="module")
def clean() -> np.ndarray:
    # A fixed draw without a chance flag: with 256 dims, k = 3 flags 0.27 % of pure-noise dims
    # (~0.7 per draw) on average; test_zscore_false_positive_rate_on_noise checks that rate.
    return np.random.default_rng(2).normal(size=(2000, 256))


def test_extreme_index_finds_planted_min_dim(planted):
    fmin, fmax = _freqs(planted)
    assert fmin[5] > 0.9  # dim 40 (std 4) occasionally dips below -8
    assert extreme_index_outliers(fmin, fmax, 0.5).tolist() == [5]
    assert extreme_index_outliers(fmin, fmax, 0.999).size == 0


def test_zscore_finds_planted_mean_dim(planted):
    assert zscore_outliers(planted.mean(axis=0), 3.0).tolist() == [5]


def test_quantile_rule_finds_planted_magnitude_dim(planted):
    # median |x| of dim 5 is ~8; the 0.99-quantile of all |x| is ~3; dim 40's median |x| is ~2.7.
    assert quantile_outliers(planted, 0.99).tolist() == [5]


def test_variance_rule_finds_planted_high_variance_dim(planted):
    # dim 40 has variance ~16 against an average of ~1.06: flagged; the shifted dim 5 has variance 1.
    assert variance_outliers(planted.var(axis=0), 5.0).tolist() == [40]


def test_clean_gaussian_has_no_zscore_or_variance_outliers(clean):
    assert zscore_outliers(clean.mean(axis=0), 3.0).size == 0
    assert variance_outliers(clean.var(axis=0), 5.0).size == 0
    assert quantile_outliers(clean, 0.99).size == 0
    fmin, fmax = _freqs(clean)
    assert extreme_index_outliers(fmin, fmax, 0.5).size == 0


def test_zscore_false_positive_rate_on_noise():
    rng = np.random.default_rng(10)
    draws = [rng.normal(size=(500, 256)) for _ in range(20)]
    flagged = [len(zscore_outliers(h.mean(axis=0), 3.0)) for h in draws]
    assert np.mean(flagged) < 2.0  # expected 256 x 0.0027 = 0.7
    assert all(variance_outliers(h.var(axis=0), 5.0).size == 0 for h in draws)


def test_thresholds_move_the_decision(planted):
    fmin, fmax = _freqs(planted)
    # In noise each dim holds ~1/256 of the extremes; a tiny threshold flags many dims.
    assert len(extreme_index_outliers(fmin, fmax, 0.002)) > 10
    assert variance_outliers(planted.var(axis=0), 100.0).size == 0
    assert zscore_outliers(np.zeros(10)).size == 0  # constant means: no spread, nothing flagged
    assert variance_outliers(np.zeros(10)).size == 0


def _fake_result(h_by_state: np.ndarray):
    """A minimal ExtractionResult stand-in built through RunningStats (S, n, d)."""
    S, n, d = h_by_state.shape
    stats = RunningStats(S, d)
    stats.update(h_by_state)
    return SimpleNamespace(
        mean=stats.mean,
        variance=stats.variance,
        argmin_freq=stats.argmin_count / n,
        argmax_freq=stats.argmax_count / n,
        sample_vectors=h_by_state.astype(np.float32),
        state_names=["emb"] + [str(i) for i in range(1, S)],
        num_states=S,
        num_tokens=n,
        model={"source": "synthetic"},
        corpus_name="synthetic",
    )


@pytest.fixture(scope="module")
def fake(planted, clean):
    return _fake_result(np.stack([clean, planted]))


def test_outliers_by_criterion_on_a_result(fake):
    assert outliers_by_criterion(fake, 0) == {c: [] for c in CRITERIA}
    found = outliers_by_criterion(fake, 1)
    assert found == {"extreme_index": [5], "zscore": [5], "quantile": [5], "variance": [40]}
    assert outlier_dims(fake, 1) == [5]
    assert strongest_dims(fake.mean[1], 1) == [5]
    table = outlier_table(fake)
    assert set(table["dim"]) == {5, 40} and set(table["state"]) == {"1"}


def test_state_outlier_frame_and_json(fake):
    by_state = criteria_by_state(fake, OutlierThresholds())
    frame = plots.state_outlier_frame(fake, 1, by_state[1])
    assert frame["dim"].tolist()[0] == 5  # strongest |z| first
    assert frame.columns.is_unique
    row = frame.set_index("dim").loc[5]
    assert row["z-score of mean"] < -3 and row["by z-score"] and not row["by variance"]
    assert row["argmin share"] > 0.9
    assert plots.state_outlier_frame(fake, 0, by_state[0]).empty
    every = plots.outlier_frame_all(fake, by_state)
    assert every["hidden state"].tolist() == ["1", "1"]
    payload = json.loads(plots.outliers_json(fake, by_state, OutlierThresholds()))
    assert payload["hidden_states"][1]["zscore"] == [5]
    assert payload["thresholds"]["zscore_k"] == 3.0
    assert [s["name"] for s in payload["hidden_states"]] == ["emb", "1"]
    headline = plots.headline_outlier(fake, by_state)
    assert headline["dim"] == 5 and headline["states"] == ["1"]


def test_layer_dim_heatmap_carries_values_and_marks(fake):
    by_state = criteria_by_state(fake, OutlierThresholds())
    for stat in plots.HEATMAP_STATS:
        values = plots.heatmap_values(fake, stat)
        fig = plots.layer_dim_heatmap(
            values, fake.state_names, stat, marks=plots.criteria_marks(by_state)
        )
        np.testing.assert_array_equal(np.asarray(fig.data[0].z), values)
        assert list(fig.layout.yaxis.ticktext) == ["emb", "1"]
    zscore_trace = next(t for t in fig.data if t.name == "z-score")
    assert list(zscore_trace.x) == [5] and list(zscore_trace.y) == [1.0]
    variance_trace = next(t for t in fig.data if t.name == "variance")
    assert variance_trace.visible == "legendonly" and list(variance_trace.x) == [40]
    np.testing.assert_allclose(plots.heatmap_values(fake, "|mean|"), np.abs(fake.mean))
    with pytest.raises(ValueError):
        plots.heatmap_values(fake, "median")


def test_token_heatmap_and_category_split():
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(5, 16))
    fig = plots.token_dim_heatmap(hidden, ["[CLS]", "a", ",", "b", "[SEP]"], "3", [2, 9])
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), hidden)
    assert list(fig.data[1].x) == [2, 9]
    assert list(fig.layout.yaxis.ticktext)[0] == "0: [CLS]"
    values = np.array([10.0, 1, 1, 2, -5, -5, 0])
    categories = np.array(
        ["position 0", "other", "other", "other", "punctuation", "punctuation", "special"]
    )
    box = plots.dimension_by_category(values, categories, 7, "2")
    assert [t.name.split(" (")[0] for t in box.data] == [
        "position 0",
        "special",
        "punctuation",
        "other",
    ]
    np.testing.assert_array_equal(np.asarray(box.data[3].y), [1, 1, 2])
    summary = plots.category_summary(values, categories).set_index("token type")
    assert summary.loc["punctuation", "mean"] == -5 and summary.loc["other", "tokens"] == 3
    # Empty categories are left out (e.g. special tokens excluded from the statistics).
    assert len(plots.dimension_by_category(values[1:4], categories[1:4], 7, "2").data) == 1


def test_every_state_has_one_home(fake):
    """criteria_by_state / outlier_dims_by_state are outliers_by_criterion / outlier_dims at every
    state; reusing the criteria gives the same dims."""
    criteria = criteria_by_state(fake)
    assert criteria == [outliers_by_criterion(fake, s) for s in range(fake.num_states)]
    dims = outlier_dims_by_state(fake)
    assert dims == [outlier_dims(fake, s) for s in range(fake.num_states)] == [[], [5]]
    assert outlier_dims_by_state(fake, criteria=criteria) == dims
    strict = OutlierThresholds(zscore_k=100.0, extreme_share=1.01)
    assert outlier_dims_by_state(fake, strict) == [[], []]


def _calls_in_loops(tree, names: set[str]) -> list[int]:
    import ast

    found = []
    loops = (ast.For, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)
    for loop in (n for n in ast.walk(tree) if isinstance(n, loops)):
        for node in ast.walk(loop):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in names:
                    found.append(node.lineno)
    return found


def test_no_module_but_outliers_loops_the_outlier_rule_over_states():
    """The "outlier dims of every state" loop is written once (report, compare, tour, trajectory,
    analyze, the UI cache and the figures call criteria_by_state / outlier_dims_by_state)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[4]
    home = root / "backend/analysis/outliers.py"
    offenders = {}
    for path in [*(root / "backend").rglob("*.py"), *(root / "ui").rglob("*.py")]:
        if path == home:
            continue
        tree = ast.parse(path.read_text())
        lines = _calls_in_loops(tree, {"outliers_by_criterion", "outlier_dims", "headline_dims"})
        if lines:
            offenders[str(path.relative_to(root))] = lines
    assert offenders == {}
