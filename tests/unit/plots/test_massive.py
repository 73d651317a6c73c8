"""Figures and tables of the Massive activations & sinks page (backend/plots/massive.py), on small
hand-made statistics: one text whose first token carries |h| = 500 in dim 2 at the last state,
two layers of heads of which the first layer's are sinks, and dim 1 an LLM.int8 outlier feature
at every site; and the by-layer line of the largest |h|."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from isoscope.analysis.massive.int8 import SITE_SHARE, Int8Stats
from isoscope.analysis.massive.magnitudes import TextMagnitudes
from isoscope.analysis.massive.sinks import SINK_THRESHOLD, SinkStats, sink_share
from isoscope.plots.massive import (
    MASSIVE_LINE,
    feature_token_figure,
    first_position_figure,
    first_position_frame,
    int8_figure,
    int8_frame,
    layer_position_figure,
    magnitudes_by_layer_figure,
    sink_frame,
    sink_heatmap_figure,
    sink_share_figure,
    top_dims_frame,
)


@pytest.fixture(scope="module")
def view() -> TextMagnitudes:
    magnitude = np.ones((2, 3, 4), dtype=np.float32)  # (states, tokens, dims)
    magnitude[1, 0, 2] = 500.0
    magnitude[1, 2, 3] = 3.0
    return TextMagnitudes(("emb", "1"), ("<s>", "Ġthe", "\n"), magnitude)


def test_layer_position_heatmap_is_log_coloured_per_state_and_position(view):
    fig = layer_position_figure(view)
    (heat,) = fig.data
    assert np.asarray(heat.z).shape == (2, 3)
    assert np.asarray(heat.z)[1, 0] == pytest.approx(np.log10(500.0))
    assert list(heat.y) == ["emb", "1"] and len(heat.x) == 3 and heat.x[0].startswith("0: ")
    assert "in dim 2" in heat.hovertext[1][0]


def test_feature_token_surface_has_dims_as_rows(view):
    (surface,) = feature_token_figure(view, 1).data
    assert np.asarray(surface.z).shape == (4, 3)  # dims x tokens
    assert np.asarray(surface.z)[2, 0] == 500.0


def test_top_dims_frame_lists_the_text_s_largest_dims(view):
    frame = top_dims_frame(view, 1, k=2)
    assert list(frame.columns) == ["position", "token", "dim 2", "dim 3"]
    assert frame["dim 2"].tolist() == [500.0, 1.0, 1.0]


@pytest.fixture(scope="module")
def sinks() -> SinkStats:
    alpha = np.array([[0.9, 0.8, 0.1], [0.2, 0.1, 0.05]])
    per_layer, share = sink_share(alpha)
    return SinkStats(alpha, per_layer, share, SINK_THRESHOLD, n_texts=4)


def test_sink_figures_and_frame(sinks):
    (heat,) = sink_heatmap_figure(sinks).data
    assert list(heat.y) == ["1", "2"] and list(heat.x) == ["head 0", "head 1", "head 2"]
    assert (heat.zmin, heat.zmax) == (0, 1)
    fig = sink_share_figure(sinks)
    assert list(fig.data[0].y) == pytest.approx([2 / 3, 0.0])
    (overall,) = fig.layout.shapes
    assert overall.y0 == pytest.approx(2 / 6)
    assert f"alpha > {SINK_THRESHOLD}" in fig.layout.yaxis.title.text
    frame = sink_frame(sinks)
    assert frame["layer"].tolist() == [1, 2] and frame["sink share"].tolist()[1] == 0.0


@pytest.fixture(scope="module")
def int8() -> Int8Stats:
    token_share = np.zeros((5, 3))  # (sites, d): dim 1 counts at every site, dim 2 at one
    token_share[:, 1] = 0.5
    token_share[0, 2] = 0.07
    site_share = (token_share >= 0.06).mean(axis=0)
    return Int8Stats(
        tuple(f"{layer}.ln_{i}" for layer in (1, 2, 3) for i in (1, 2))[:5],
        token_share,
        np.arange(5.0) + 7,
        site_share,
        (1,),
        n_tokens=100,
    )


def test_int8_bars_colour_the_outlier_features(int8):
    fig = int8_figure(int8)
    (bars,) = fig.data
    assert list(bars.x) == ["dim 1", "dim 2"]  # dims that count at no site are left out
    assert list(bars.y) == pytest.approx([1.0, 0.2])
    assert bars.marker.color[0] != bars.marker.color[1]  # only dim 1 counts at >= 25 % of sites
    (line,) = fig.layout.shapes
    assert line.y0 == SITE_SHARE
    frame = int8_frame(int8)
    assert frame["site"].tolist() == ["1.ln_1", "1.ln_2", "2.ln_1", "2.ln_2", "3.ln_1"]
    assert frame.columns[2] == "dim 1: tokens with |x| >= 6"


def test_int8_bars_show_one_dim_when_none_counts():
    zero = np.zeros((1, 3))
    stats = Int8Stats(("1.ln_1",), zero, np.array([1.0]), zero[0], (), n_tokens=10)
    assert list(int8_figure(stats).data[0].x) == ["dim 0"]


def test_first_position_contrast():
    contrast = SimpleNamespace(
        state_names=("emb", "1"),
        anisotropy_with=np.array([0.2, 0.9]),
        anisotropy_without=np.array([0.2, 0.3]),
        max_abs_mean_with=np.array([1.0, 40.0]),
        max_abs_mean_without=np.array([1.0, 2.0]),
    )
    fig = first_position_figure(contrast)
    assert [t.name for t in fig.data] == ["all positions", "first position excluded"]
    assert fig.data[1].line.dash == "dash" and fig.layout.xaxis.type == "category"
    frame = first_position_frame(contrast)
    assert frame["largest |mean|, first position excluded"].tolist() == [1.0, 2.0]


def test_a_hybrid_s_sink_rows_and_the_mixer_sites_table():
    from isoscope.analysis.massive.inner import SSM_INPUT, InnerReading, InnerSite
    from isoscope.plots.massive import inner_frame

    alpha = np.array([[0.9, 0.1], [0.2, 0.4]])
    per_layer, share = sink_share(alpha)
    sinks = SinkStats(alpha, per_layer, share, SINK_THRESHOLD, 3, (2, 4), {1: "Mamba-2"})
    assert list(sink_heatmap_figure(sinks).data[0].y) == ["2", "4"]
    assert list(sink_frame(sinks)["layer"]) == [2, 4]
    site = InnerSite("L1.mixer:ssm_input", SSM_INPUT, "layers.0.mixer.in_proj", 1, "Mamba-2")
    reading = InnerReading(
        (site,), (128,), np.array([0.1]), np.array([9.0]), ((5,),), ((5, 7),), 40
    )
    frame = inner_frame(reading)
    assert frame.loc[0, "site"] == "L1.mixer:ssm_input" and frame.loc[0, "channels"] == 128
    assert frame.loc[0, "max / median"] == 90.0
    assert frame.loc[0, "scale-free outlier channels"] == "5, 7"


def test_layer_figure_keeps_its_log_axis_around_the_data():
    """The |h| = 100 label sits at 100 on the log axis (log10 units for annotations), not at
    10^100, which stretched the axis to 10^98 and flattened every line."""
    S = 3
    stats = SimpleNamespace(
        state_names=["emb", "1", "2"],
        top_value=np.array([[6.0, 5.0, 4.0], [10.5, 9.0, 8.0], [7.0, 6.5, 6.0]]),
        top_dim=np.full((S, 3), 99),
        top_position=np.zeros((S, 3), dtype=int),
        top_token=np.full((S, 3), "[CLS]"),
        median_abs=np.array([0.27, 0.31, 0.2]),
    )
    fig = magnitudes_by_layer_figure(stats)
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.type == "category"  # "emb" is kept beside "1", "2"
    (line,) = fig.layout.shapes
    assert line.y0 == line.y1 == MASSIVE_LINE  # shapes: data units
    (label,) = fig.layout.annotations
    assert label.y == pytest.approx(np.log10(MASSIVE_LINE))  # annotations: log10 units
    assert label.text == "|h| = 100"
