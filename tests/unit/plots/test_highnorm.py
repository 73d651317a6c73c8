"""Figures of high-norm tokens (backend/plots/highnorm.py) on the planted scan of the analysis
test: one trace per kind of token, the histogram, the per-state frame, the overlay's patch centres
and circles, and the massive frame's carrier columns for image models."""

from __future__ import annotations

import numpy as np

from isoscope.plots.highnorm import (
    high_norm_frame,
    image_norm_overlay,
    norm_by_kind_figure,
    norm_histogram,
)
from isoscope.plots.massive import massive_frame
from tests.unit.analysis.massive.test_highnorm import planted_scan


def test_figures_and_frames():
    scan = planted_scan()
    thresholds = scan.thresholds()
    assert [t.name for t in norm_by_kind_figure(scan).data] == ["CLS", "register", "patch"]
    hist = norm_histogram(scan, 1, float(thresholds[1]))
    assert len(hist.data) == 3 and len(hist.data[2].x) == 4 * 6
    frame = high_norm_frame(scan, thresholds)
    assert frame["high-norm patches"].tolist() == [0.0, round(1 / 24, 4)]
    assert frame["mean norm: register"].tolist() == [1.0, 20.0]
    image = np.zeros((14, 21, 3), dtype=np.uint8)  # 2x3 patches of 7 px
    fig = image_norm_overlay(image, scan.patch_norms(1, 2), float(thresholds[1]))
    heat, circles = fig.data[1], fig.data[2]
    assert list(heat.x) == [3.5, 10.5, 17.5] and list(heat.y) == [3.5, 10.5]
    assert list(circles.x) == [3.5] and list(circles.y) == [10.5]  # patch r1c0
    columns = massive_frame(scan.massive).columns
    assert "at register" in columns and "at first position" not in columns


def test_the_overlay_scale_reads_when_every_patch_has_the_same_norm():
    image = np.zeros((14, 14, 3), dtype=np.uint8)
    varied = image_norm_overlay(image, np.array([[1.0, 2.0], [3.0, 4.0]]), 10.0).data[1]
    assert (varied.zmin, varied.zmax) == (1.0, 4.0)
    equal = np.full((2, 2), 8.0) + np.array([[0, 1e-6], [2e-6, 0]])  # a final LayerNorm's norms
    heat = image_norm_overlay(image, equal, 10.0).data[1]
    assert heat.zmin < 7.93 and heat.zmax > 8.07
