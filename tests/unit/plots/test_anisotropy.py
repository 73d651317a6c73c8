"""Figures and tables of the Anisotropy page (backend/plots/anisotropy.py) on the planted result
of the report tests: dim 7 shifted to -6 at hidden state 2 makes that state anisotropic, carried
by dim 7 (Timkey & van Schijndel), and mean-centring removes it while IsoScore stays."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.anisotropy import by_state
from isoscope.analysis.projections.postprocess import make_postprocessor
from isoscope.plots.anisotropy import (
    METRICS,
    SERIES_COLOURS,
    contrast_frame,
    contribution_frame,
    cosine_contribution_figure,
    cosine_histogram_figure,
    histogram_frame,
    histogram_small_multiples,
    mean_shift_contrast_figure,
    metrics_by_layer_figure,
    metrics_frame,
)
from tests.report_inputs import planted_result

PLANTED_STATE, PLANTED_DIM = 2, 7


@pytest.fixture(scope="module")
def series():
    result = planted_result()
    return {
        "raw": by_state(result, n_pairs=2000),
        "processed": by_state(result, make_postprocessor("center"), n_pairs=2000),
    }


def test_the_planted_state_is_anisotropic_and_centring_removes_it(series):
    raw, centred = series["raw"].anisotropy, series["processed"].anisotropy
    assert raw[PLANTED_STATE] > 0.5 > 0.1 > abs(raw[0])
    assert abs(centred[PLANTED_STATE]) < 0.1


def test_cosine_histogram_one_bar_trace_per_series_with_the_mean_in_the_legend(series):
    fig = cosine_histogram_figure(series, PLANTED_STATE)
    assert [t.type for t in fig.data] == ["bar", "bar"]
    assert fig.data[0].name == f"raw (mean {series['raw'].anisotropy[PLANTED_STATE]:.3f})"
    assert fig.data[0].marker.color == SERIES_COLOURS["raw"]
    assert np.isclose(np.sum(fig.data[0].y), 1.0)  # shares of the pairs
    assert len(fig.layout.shapes) == 2  # one dashed mean line per series
    assert "hidden state 2" in fig.layout.title.text


def test_small_multiples_one_panel_per_state_and_legend_once_per_series(series):
    fig = histogram_small_multiples(series, columns=2)
    assert len(fig.data) == 2 * 3
    assert [t.showlegend for t in fig.data] == [True, False, False, True, False, False]
    assert [a.text for a in fig.layout.annotations] == ["state emb", "state 1", "state 2"]


def test_frames_behind_the_histograms_and_metrics(series):
    hist = histogram_frame(series)
    assert set(hist["series"]) == {"raw", "processed"}
    shares = hist.groupby(["series", "state"])["share"].sum()
    assert np.allclose(shares, 1.0)
    metrics = metrics_frame(series)
    assert metrics.columns[0] == "series" and len(metrics) == 2 * 3


def test_metrics_by_layer_one_panel_per_metric(series):
    fig = metrics_by_layer_figure(series)
    assert len(fig.data) == 2 * len(METRICS)
    assert [a.text for a in fig.layout.annotations] == list(METRICS.values())
    dashes = {t.name: t.line.dash for t in fig.data}
    assert dashes == {"raw": "solid", "processed": "dash"}
    assert len(metrics_by_layer_figure(series, ["anisotropy"]).data) == 2


def test_the_contribution_bars_name_the_planted_dim_and_sum_to_the_anisotropy(series):
    raw = series["raw"]
    frame = contribution_frame(raw, k=3)
    top = frame[(frame["state"] == "2") & (frame["rank"] == 1)].iloc[0]
    assert top["dim"] == PLANTED_DIM and top["share_of_mean_cosine"] > 0.9
    fig = cosine_contribution_figure(raw, k=3)
    bars = [t for t in fig.data if t.type == "bar"]
    total = np.sum([np.asarray(t.y, dtype=float) for t in bars], axis=0)
    assert np.allclose(total, np.nan_to_num(raw.anisotropy))
    assert fig.data[-1].name == "anisotropy (total)"


def test_mean_shift_contrast_moves_the_cosine_not_isoscore(series):
    raw, centred = series["raw"], series["processed"]
    frame = contrast_frame(raw, centred)
    assert frame["state"].tolist() == ["emb", "1", "2"]
    assert np.allclose(frame["isoscore_raw"], frame["isoscore_mean_centered"], equal_nan=True)
    fig = mean_shift_contrast_figure(raw, centred)
    assert [t.name for t in fig.data] == [
        "anisotropy, raw",
        "anisotropy, mean-centred",
        "isoscore, raw",
        "isoscore, mean-centred",
    ]
    assert fig.layout.xaxis.type == fig.layout.xaxis2.type == "category"
