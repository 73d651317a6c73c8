"""Figures and tables of the Compare page (backend/plots/compare.py): the comparison of the planted
pair (B gains outlier dim 5 at hidden state 1), LayerNorm differences, and a hand-made
three-checkpoint trajectory in which dim 3 becomes an outlier at step 200."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.compare.comparison import compare
from isoscope.analysis.compare.records import LNDifference
from isoscope.analysis.compare.trajectory import CheckpointPoint, Trajectory
from isoscope.plots.compare import (
    CHANGE_COLOURS,
    SIDE_COLOURS,
    STATE_METRICS,
    TRAJECTORY_METRICS,
    abs_mean_diff_frame,
    abs_mean_diff_heatmap,
    cka_frame,
    cka_heatmap,
    emergence_figure,
    ln_diff_heatmap,
    ln_gamma_flag_heatmap,
    outlier_change_figure,
    state_metric_figure,
    states_frame,
    trajectory_figure,
    trajectory_frame,
)
from tests.comparison_inputs import planted_pair


@pytest.fixture(scope="module")
def comparison():
    return compare(*planted_pair())


def test_cka_heatmap_labels_every_cell_and_outlines_the_diagonal():
    matrix = np.array([[1.0, 0.5, np.nan], [0.25, 0.9, 0.1]])
    fig = cka_heatmap(matrix, ["emb", "1"], ["emb", "1", "2"], "small", "big")
    (heat,) = fig.data
    assert [list(row) for row in heat.text] == [["1.00", "0.50", ""], ["0.25", "0.90", "0.10"]]
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    assert len(fig.layout.shapes) == 2  # min(rows, columns) diagonal cells
    assert fig.layout.xaxis.title.text == "big: hidden state"
    frame = cka_frame(matrix, ["emb", "1"], ["emb", "1", "2"])
    assert len(frame) == 6 and frame.iloc[1].to_dict() == {
        "state_a": "emb",
        "state_b": "1",
        "cka": 0.5,
    }


def test_the_planted_comparison_cka_is_one_at_the_unchanged_state(comparison):
    assert comparison.cka.matrix[0, 0] == pytest.approx(1.0)


@pytest.mark.parametrize("metric", ["anisotropy", "isoscore", "top_share"])
def test_state_metric_figure_overlays_a_and_b(comparison, metric):
    fig = state_metric_figure(comparison, metric, "small", "big")
    assert [t.name for t in fig.data] == ["small", "big"]
    assert [t.line.color for t in fig.data] == [SIDE_COLOURS["A"], SIDE_COLOURS["B"]]
    assert fig.layout.title.text.startswith(STATE_METRICS[metric])
    if metric == "anisotropy":
        assert fig.data[1].y[1] > 0.5 > abs(fig.data[0].y[1])  # B's planted dim


def test_sts_is_left_out_when_it_was_not_measured(comparison):
    assert state_metric_figure(comparison, "sts").data == ()


def test_outlier_change_shows_the_gained_dim(comparison):
    fig = outlier_change_figure(comparison, "small", "big")
    traces = {t.name: t for t in fig.data}
    gained = traces["gained (only big)"]
    assert list(gained.x) == ["1"] and list(gained.y) == [5]
    assert gained.marker.color == CHANGE_COLOURS["gained"]
    assert list(traces["lost (only small)"].x) == []
    frame = states_frame(comparison)
    assert frame["gained"].tolist() == ["", "5"]


def test_abs_mean_difference_heatmap_is_centred_on_zero(comparison):
    diff = comparison.abs_mean_diff
    fig = abs_mean_diff_heatmap(diff, ["emb", "1"])
    (heat,) = fig.data
    assert heat.zmid == 0.0 and heat.zmax == pytest.approx(float(np.abs(diff).max()))
    assert np.argmax(np.asarray(heat.z)[1]) == 5
    frame = abs_mean_diff_frame(diff, ["emb", "1"])
    assert len(frame) == diff.size
    assert frame.loc[frame["abs_mean_b_minus_a"].idxmax(), ["state", "dim"]].tolist() == ["1", 5]


@pytest.mark.parametrize("which", ["gamma", "beta"])
def test_layernorm_difference_heatmap(which):
    ln = LNDifference(["emb LN", "layer 1 LN"], np.eye(2, 3), -np.eye(2, 3))
    (heat,) = ln_diff_heatmap(ln, which).data
    assert list(heat.y) == ["emb LN", "layer 1 LN"] and heat.zmid == 0.0
    assert np.asarray(heat.z)[0, 0] == (1.0 if which == "gamma" else -1.0)
    assert heat.colorbar.title.text == {"gamma": "Δγ", "beta": "Δβ"}[which]


def _point(step: int, outliers: list[int], gamma_flags: list[int]) -> CheckpointPoint:
    states = [
        {
            "index": s,
            "name": name,
            "max_abs_mean": float(step) / 100 + s,
            "max_abs_mean_dim": 3,
            "outlier_dims": outliers if s == 1 else [],
            "anisotropy": 0.1 * s,
            "isoscore": 0.5,
        }
        for s, name in enumerate(["emb", "1"])
    ]
    return CheckpointPoint(
        step, f"/ckpt/step-{step}", "fp", {}, states, {"layer 1 LN": gamma_flags}, gamma_flags
    )


@pytest.fixture(scope="module")
def trajectory():
    return Trajectory([_point(100, [], []), _point(200, [3], [7]), _point(300, [3], [7, 9])])


@pytest.mark.parametrize("metric", list(TRAJECTORY_METRICS))
def test_trajectory_one_line_per_state_over_the_steps(trajectory, metric):
    fig = trajectory_figure(trajectory, metric)
    assert [t.name for t in fig.data] == ["state emb", "state 1"]
    assert list(fig.data[0].x) == [100, 200, 300]
    if metric == "outliers":
        assert list(fig.data[1].y) == [0, 1, 1]


def test_emergence_and_gamma_flags_over_the_steps(trajectory):
    (trace,) = emergence_figure(trajectory).data
    assert trace.name == "state 1" and list(trace.x) == [200] and list(trace.y) == [3]
    assert list(trace.marker.size) == [6 + 3 * 2]  # an outlier at two checkpoints
    (heat,) = ln_gamma_flag_heatmap(trajectory).data
    assert np.asarray(heat.z).tolist() == [[0, 1, 2]] and list(heat.x) == ["100", "200", "300"]
    frame = trajectory_frame(trajectory)
    assert len(frame) == 3 * 2 and frame["outlier_dims"].tolist()[-1] == "3"
    assert np.asarray(ln_gamma_flag_heatmap(Trajectory()).data[0].z).size == 0  # no checkpoint yet
