"""Figures and tables of the Sentence similarity page (backend/plots/similarity.py): STS lines
with a missing value as a gap, word-sense accuracies against chance, and the threshold sweep of
cosines that separate the senses perfectly above 0.5."""

from __future__ import annotations

import numpy as np

from isoscope.analysis.similarity import threshold_sweep
from isoscope.plots.similarity import (
    SERIES,
    sts_figure,
    sts_frame,
    sweep_figure,
    word_sense_figure,
    word_sense_frame,
)

STS_ROWS = [
    {"name": "emb", "raw": 40.0, "clipped": 45.0, "clipped_dims": []},
    {"name": "1", "raw": 60.0, "clipped": float("nan"), "clipped_dims": [7, 9]},
]
SENSE_ROWS = [
    {
        "name": name,
        "raw_accuracy": acc,
        "raw_loo_accuracy": acc - 0.05,
        "processed_accuracy": acc + 0.1,
        "processed_loo_accuracy": None,
        "clipped_dims": [],
    }
    for name, acc in (("emb", 0.6), ("1", 0.8))
]


def test_sts_lines_one_per_series_with_a_gap_for_a_missing_value():
    fig = sts_figure(STS_ROWS)
    assert [t.name for t in fig.data] == ["raw", "clipped"]  # no processed column, no line
    assert list(fig.data[0].x) == ["emb", "1"] and fig.layout.xaxis.type == "category"
    assert list(fig.data[1].y) == [45.0, None]  # NaN is a gap, not a zero
    assert fig.data[1].line.color == SERIES["clipped"][1]
    rows = [r | {"processed": 50.0} for r in STS_ROWS]
    assert sts_figure(rows, processed_label="whitened").data[-1].name == "whitened"


def test_sts_frame_flattens_the_clipped_dims():
    frame = sts_frame(STS_ROWS)
    assert frame["state"].tolist() == ["emb", "1"] and frame["clipped_dims"].tolist() == ["", "7 9"]


def test_word_sense_figure_best_and_leave_one_out_per_series_against_chance():
    fig = word_sense_figure(SENSE_ROWS, processed_label="centred")
    assert [t.name for t in fig.data] == [
        "raw (best threshold)",
        "raw (leave-one-out)",
        "centred (best threshold)",
        "centred (leave-one-out)",
    ]
    assert [t.line.dash for t in fig.data] == [None, "dot", None, "dot"]
    assert list(fig.data[3].y) == [None, None]
    (chance,) = fig.layout.shapes
    assert chance.y0 == chance.y1 == 0.5
    assert tuple(fig.layout.yaxis.range) == (0.0, 1.02)
    assert word_sense_frame(SENSE_ROWS)["state"].tolist() == ["emb", "1"]


def test_sweep_figure_marks_the_best_threshold_of_each_variant():
    cosines = np.array([0.1, 0.3, 0.6, 0.9])
    same = np.array([False, False, True, True])
    sweeps = {"raw": threshold_sweep(cosines, same), "custom": threshold_sweep(cosines, ~same)}
    fig = sweep_figure(sweeps, "2")
    line, star, other, _ = fig.data
    assert line.name == "raw" and line.line.shape == "hv"
    assert list(star.y) == [1.0] and 0.3 <= star.x[0] < 0.6  # separates the senses
    assert other.name == "custom" and other.line.color is None  # not one of the page's series
    assert "state 2" in fig.layout.title.text
