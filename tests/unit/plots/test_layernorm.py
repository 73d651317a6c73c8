"""Figures and tables of the LayerNorm page (backend/plots/layernorm.py) on hand-made records:
two norms whose gamma has an outlier in dim 2, an ablation of dim 2 against two random controls,
and a one-dimension-at-a-time sweep where dim 2 does the most damage."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.layernorm.ablation import AblationReport, Effect, SweepResult
from isoscope.analysis.layernorm.params import LNOutliers, LNParams
from isoscope.plots.layernorm import (
    ABLATION_COLOR,
    METRIC_LABELS,
    ablation_vs_controls,
    available_metrics,
    flag_counts_bar,
    mlm_loss_figure,
    overlap_figure,
    overlap_table,
    param_heatmap,
    sweep_bar,
)

NAMES = ["emb LN", "layer 1 LN"]


@pytest.fixture(scope="module")
def params() -> LNParams:
    gamma = np.ones((2, 6)) + 0.01 * np.arange(6)
    gamma[:, 2] = 8.0
    beta = np.zeros((2, 6))
    return LNParams(NAMES, ["embedding", "output"], gamma, beta, np.array([True, True]))


@pytest.fixture(scope="module")
def outliers() -> LNOutliers:
    flags = np.zeros((2, 6), dtype=bool)
    flags[:, 2] = True
    return LNOutliers(NAMES, flags, np.zeros((2, 6), dtype=bool), 3.0, 0.5, [2])


def test_param_heatmap_z_scores_circle_the_flagged_cells(params, outliers):
    fig = param_heatmap(params, outliers.weight_flags, "gamma", "z-score", outlier_dims=[2])
    heat, circles = fig.data
    z = np.asarray(heat.z)
    assert z.argmax(axis=1).tolist() == [2, 2] and heat.zmid == 0.0
    assert list(circles.x) == [2, 2] and list(circles.y) == NAMES
    assert [s.x0 for s in fig.layout.shapes] == [2]
    assert "outlier dims 2" in fig.layout.title.text


def test_param_heatmap_values_centre_gamma_on_one_and_a_flat_norm_reads_zero(params):
    flat = LNParams(["fresh"], ["output"], np.ones((1, 4)), np.zeros((1, 4)), np.array([True]))
    (heat,) = param_heatmap(flat, np.zeros((1, 4), dtype=bool), "gamma", "z-score").data
    assert np.asarray(heat.z).tolist() == [[0.0] * 4]  # no spread: no division by zero
    (values,) = param_heatmap(params, np.zeros((2, 6), dtype=bool), "gamma", "value").data
    assert values.zmid == 1.0 and values.colorbar.title.text == "gamma"
    (beta,) = param_heatmap(params, np.zeros((2, 6), dtype=bool), "beta", "value").data
    assert beta.zmid == 0.0


def test_flag_counts_per_norm(outliers):
    gamma, beta = flag_counts_bar(outliers).data
    assert list(gamma.y) == [1, 1] and list(beta.y) == [0, 0]


def test_overlap_table_and_figure():
    hidden = [[], [2, 4]]
    table = overlap_table([2, 5], ["emb", "1"], hidden)
    assert table["also LN outliers"].tolist() == ["—", "2"]
    assert table["LN outliers not outlying here"].tolist() == ["2, 5", "5"]
    fig = overlap_figure([2, 5], ["emb", "1"], hidden, hidden_size=6)
    dots, anchors = fig.data
    assert list(dots.x) == [2, 4] and list(dots.marker.color)[0] == ABLATION_COLOR
    assert list(anchors.y) == ["emb", "1"]  # a row for a state without outliers too
    assert [s.x0 for s in fig.layout.shapes] == [2, 5]


def _effect(cosine: float, loss: float) -> Effect:
    return Effect(np.full(2, cosine), np.full(2, cosine), np.array([0.3, 0.5]), None, loss)


@pytest.fixture(scope="module")
def report() -> AblationReport:
    return AblationReport(
        dims=[2],
        norms=NAMES,
        state_names=["emb", "1"],
        effect=_effect(0.4, 5.0),
        controls=[([0], _effect(0.99, 2.1)), ([4], _effect(0.98, 2.2))],
        anisotropy_original=np.array([0.2, 0.4]),
        sts_spearman_original=None,
        mlm_loss_original=2.0,
        num_texts=8,
        num_masked=30,
        seed=0,
        seconds=0.0,
    )


def test_ablation_against_its_controls(report):
    assert available_metrics(report) == [k for k in METRIC_LABELS if k != "sts_change"]
    fig = ablation_vs_controls(report, "embedding_cosine")
    box, ablation = fig.data
    assert box.name == "random controls (2)" and len(box.y) == 2 * 2
    assert list(ablation.y) == [0.4, 0.4] and ablation.name == "ablated dims 2"
    change = ablation_vs_controls(report, "anisotropy_change").data[1]
    assert list(change.y) == pytest.approx([0.1, 0.1])
    with pytest.raises(ValueError, match="not available"):
        ablation_vs_controls(report, "sts_change")


def test_mlm_loss_bars(report):
    (bars,) = mlm_loss_figure(report).data
    assert list(bars.x) == ["original", "ablation", "control 1", "control 2"]
    assert list(bars.text) == ["2.000", "5.000", "2.100", "2.200"]
    assert "30 masked tokens" in mlm_loss_figure(report).layout.title.text


@pytest.fixture(scope="module")
def sweep_result() -> SweepResult:
    cosine = np.array([[1.0, 0.99], [1.0, 0.6], [1.0, 0.98]])
    return SweepResult(
        dims=np.array([1, 2, 3]),
        embedding_cosine=cosine,
        token_cosine=cosine,
        mlm_loss=np.array([2.0, 3.5, 2.1]),
        mlm_loss_original=2.0,
        norms=NAMES,
        state_names=["emb", "1"],
        num_texts=8,
        complete=False,
        seconds=0.0,
        method="zero",
    )


@pytest.mark.parametrize("metric", ["embedding_drift", "token_drift", "mlm_loss_increase"])
def test_sweep_bar_red_for_the_layernorm_outlier_dims(sweep_result, metric):
    fig = sweep_bar(sweep_result, metric=metric, highlight=[2])
    (bars,) = fig.data
    assert np.argmax(bars.y) == 1 and bars.marker.color[1] == ABLATION_COLOR
    assert bars.marker.color[0] != ABLATION_COLOR
    assert "stopped early" in fig.layout.title.text
    assert len(fig.layout.annotations) == 3  # the top five, of three dims


def test_sweep_bar_refuses_an_unknown_metric(sweep_result):
    with pytest.raises(ValueError, match="unknown or unavailable"):
        sweep_bar(sweep_result, metric="perplexity")
