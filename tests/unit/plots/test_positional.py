"""Figures of the Positional information page (backend/plots/positional.py) on small hand-made
inputs: position tables, the probe, TUPE terms, the variance lab (log-log, see also
test_axes.py), the query/key views and the image patch grid."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from isoscope.analysis.positional.tupe import TERM_LABELS, TERMS
from isoscope.plots.positional import (
    contribution_bars,
    contribution_heatmap,
    cosine_heatmap,
    extreme_share_bars,
    grid_probe_lines,
    layernorm_params,
    patch_similarity_map,
    patch_similarity_multiples,
    position_pca,
    probe_accuracy_line,
    qk_heatmaps,
    qk_layer_lines,
    tupe_heatmaps,
    tupe_share_bars,
    variance_plot,
)
from tests.unit.plots.test_axes import _curves


def test_cosine_heatmap_is_diverging_from_minus_one_to_one():
    (heat,) = cosine_heatmap(np.eye(3)).data
    assert (heat.zmin, heat.zmid, heat.zmax) == (-1, 0, 1) and list(heat.x) == [0, 1, 2]


def test_position_pca_colours_by_position_and_names_the_explained_variance():
    fig = position_pca(np.arange(10.0).reshape(5, 2), np.array([0.6, 0.25]))
    assert list(fig.data[0].marker.color) == [0, 1, 2, 3, 4]
    assert "PC1 60%" in fig.layout.title.text and "PC2 25%" in fig.layout.title.text


def test_extreme_share_bars_rank_dims_and_star_the_outliers():
    argmax = np.array([0.1, 0.7, 0.0, 0.2])
    argmin = np.array([0.0, 0.0, 0.5, 0.0])
    fig = extreme_share_bars(argmax, argmin, outliers=[2], top=3)
    assert list(fig.data[0].x) == ["1", "2 ★", "3"]
    assert list(fig.data[1].y) == [0.0, 0.5, 0.0]


def test_layernorm_params_highlight_only_dims_that_exist():
    gamma, beta = np.ones(4), np.zeros(4)
    fig = layernorm_params(gamma, beta, "emb LN", highlight=[1, 9])
    marks = [t for t in fig.data if t.name == "hidden-state outlier"]
    assert len(marks) == 2 and all(list(t.x) == [1] for t in marks)
    assert [t.showlegend for t in marks] == [True, False]
    assert len(layernorm_params(gamma, beta, "emb LN", highlight=[]).data) == 2


def test_probe_line_with_its_baseline():
    fig = probe_accuracy_line(["emb", "1"], np.array([0.9, 0.5]), np.array([1.0, 0.6]), 0.1)
    assert [t.name for t in fig.data] == [
        "held-out texts",
        "training texts",
        "majority-class baseline",
    ]
    assert list(fig.data[2].y) == [0.1, 0.1] and fig.layout.xaxis.type == "category"


def test_contributions_outliers_red_and_shares_per_state():
    contributions = np.array([[1.0, 3.0, 0.0], [2.0, 2.0, 4.0]])
    (bars,) = contribution_bars(contributions[0], outliers=[1], top=2, state_name="1").data
    assert list(bars.x) == ["1", "0"] and bars.marker.color[0] != bars.marker.color[1]
    (heat,) = contribution_heatmap(["emb", "1"], contributions).data
    assert np.allclose(np.asarray(heat.z).sum(axis=1), 1.0)
    zero = contribution_heatmap(["emb"], np.zeros((1, 2))).data[0]
    assert np.isfinite(np.asarray(zero.z)).all()  # no division by zero


def test_tupe_heatmaps_share_one_colour_scale_and_bars_per_term():
    rng = np.random.default_rng(0)
    terms = {t: rng.normal(size=(2, 3, 3)) for t in (*TERMS, "remainder")}
    real = 5 * np.ones((2, 3, 3))
    fig = tupe_heatmaps(terms, real, head=1, tokens=["[CLS]", "a", "b"])
    assert len(fig.data) == 6
    assert {t.zmax for t in fig.data} == {5.0} and [t.showscale for t in fig.data].count(True) == 1
    shares = {"all": dict.fromkeys(TERMS, 0.25), "body": dict.fromkeys(TERMS, 0.25)}
    bars = tupe_share_bars(shares)
    assert [t.name for t in bars.data] == [TERM_LABELS[t] for t in TERMS]
    assert list(bars.data[0].x) == ["all pairs", "other pairs"]


@pytest.mark.parametrize("which", ["attn", "resid"])
def test_variance_plot_one_line_per_layer_with_the_theory(which):
    fig = variance_plot(_curves(layers=2), which, show_seeds=False)
    names = [t.name for t in fig.data]
    assert names[:2] == [
        f"layer 1 (slope {-1.0 if which == 'attn' else 0.0:+.2f})",
        f"layer 2 (slope {-1.0 if which == 'attn' else 0.0:+.2f})",
    ]
    assert (names[-1].startswith("theory")) == (which == "attn")
    bands = [t for t in variance_plot(_curves(layers=2), which).data if t.fill == "toself"]
    assert len(bands) == 2  # one seed band per layer


def test_query_key_views_one_panel_and_one_line_per_model():
    trained = SimpleNamespace(label="trained", cos_qk=np.array([[0.5, -0.2], [0.1, 0.9]]))
    random = SimpleNamespace(label="random init", cos_qk=np.zeros((2, 2)))
    fig = qk_heatmaps([trained, random], "cos_qk", "cos(q, k)")
    assert len(fig.data) == 2 and fig.data[0].zmin == -1 and fig.data[0].zmax == 1
    assert [a.text for a in fig.layout.annotations] == ["trained", "random init"]
    lines = qk_layer_lines([trained, random], "cos_qk", "cos(q, k)")
    assert list(lines.data[0].y) == pytest.approx([0.15, 0.5]) and list(lines.data[0].x) == [1, 2]


def test_patch_grid_maps_and_probes():
    cosines = np.random.default_rng(1).uniform(-1, 1, size=(2, 3, 2, 3))
    fig = patch_similarity_map(cosines, 1, 2)
    heat, chosen = fig.data
    assert np.array_equal(np.asarray(heat.z), cosines[1, 2])
    assert (list(chosen.x), list(chosen.y)) == ([2], [1])
    tiled = np.asarray(patch_similarity_multiples(cosines).data[0].z, dtype=float)
    assert tiled.shape == (2 * 3 - 1, 3 * 4 - 1)
    assert np.array_equal(tiled[3:5, 4:7], cosines[1, 1])  # tile (1, 1), after a blank line
    assert np.isnan(tiled[2]).all()
    row = SimpleNamespace(accuracy=np.array([0.4, 0.9]), chance=0.5)
    column = SimpleNamespace(accuracy=np.array([0.3, 0.8]), chance=1 / 3)
    probe = grid_probe_lines(["emb", "1"], row, column)
    assert [t.name for t in probe.data] == [
        "row (held-out images)",
        "row: majority baseline",
        "column (held-out images)",
        "column: majority baseline",
    ]
