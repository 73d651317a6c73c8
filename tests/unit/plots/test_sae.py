"""The SAE page's figures, read through ``fig.data``."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.plots.sae import dense_figure, fidelity_figure, frequency_figure, loadings_figure

FIDELITY = {
    "first_position": {"fvu": 3.0, "l0": 4.0, "tokens": 5},
    "massive": {"fvu": None, "l0": None, "tokens": 0},
    "special": {"fvu": 0.5, "l0": 10.0, "tokens": 7},
    "ordinary": {"fvu": 0.2, "l0": 30.0, "tokens": 90},
    "all": {"fvu": 0.3, "l0": 28.0, "tokens": 102},
}


def test_fidelity_bars_skip_kinds_without_tokens():
    fig = fidelity_figure(FIDELITY)
    fvu, l0 = fig.data
    assert list(fvu.x) == ["first position", "special tokens", "ordinary tokens"]
    assert list(fvu.y) == [3.0, 0.5, 0.2] and list(l0.y) == [4.0, 10.0, 30.0]
    assert list(fvu.customdata) == [5, 7, 90]


@pytest.mark.parametrize("share", [0.01, 0.1, 0.5])
def test_frequency_histogram_leaves_dead_features_out(share):
    frequency = np.array([0.0, 0.0, 0.001, 0.2, 0.9])
    fig = frequency_figure(frequency, share)
    np.testing.assert_allclose(fig.data[0].x, np.log10([0.001, 0.2, 0.9]))
    assert fig.layout.shapes[0].x0 == pytest.approx(np.log10(share))


def test_loadings_put_the_strongest_on_top_and_colour_the_sign():
    dim = {"dim": 7, "features": [{"feature": 3, "loading": -0.9, "frequency": 0.5},
                                  {"feature": 1, "loading": 0.4, "frequency": 0.1}]}  # fmt: skip
    bar = loadings_figure(dim).data[0]
    assert list(bar.y) == ["feature 1", "feature 3"]  # plotly draws the last bar on top
    assert list(bar.marker.color) == ["#1f77b4", "#d62728"]


def test_dense_scatter_colours_by_the_largest_pc_cosine():
    dense = [{"feature": 1, "frequency": 0.8, "cos_mean": 0.99, "cos_pcs": [0.1, 0.7, 0.2]},
             {"feature": 5, "frequency": 0.3, "cos_mean": -0.2, "cos_pcs": []}]  # fmt: skip
    scatter = dense_figure(dense).data[0]
    assert list(scatter.marker.color) == [0.7, 0.0]
    assert list(scatter.y) == [0.99, -0.2]
