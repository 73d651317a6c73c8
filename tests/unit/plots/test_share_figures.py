"""The figures the report and the guided tour show are built in backend/plots (issue 31): the
extra anisotropy lines, the trained-vs-random lines and the report's massive-activation summary."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from isoscope.plots.massive import massive_summary_figure
from isoscope.plots.overview import anisotropy_with_lines, trained_vs_random_figure

NAMES = ["emb", "1", "2"]


def test_anisotropy_with_lines_adds_one_dashed_trace_per_line():
    raw = np.array([0.1, 0.4, 0.6])
    fig = anisotropy_with_lines(NAMES, raw, [([0.1, 0.2, 0.3], "zeroed", "dash")])
    assert [t.name for t in fig.data] == ["raw", "zeroed"]
    assert list(fig.data[1].y) == [0.1, 0.2, 0.3] and fig.data[1].line.dash == "dash"
    assert fig.layout.legend.orientation == "h" and fig.layout.xaxis.type == "category"


def test_trained_vs_random_draws_both_models():
    fig = trained_vs_random_figure(NAMES, [0.2, 0.5, 0.7], [0.9, 0.9, 0.9])
    assert [t.name for t in fig.data] == ["this model", "random init"]
    assert fig.data[1].line.dash == "dot" and "random-init copy" in fig.layout.title.text


def test_massive_summary_has_the_sink_panel_only_when_sinks_were_measured():
    stats = SimpleNamespace(
        state_names=NAMES, top_value=np.array([[1.0], [150.0], [900.0]]), median_abs=np.ones(3)
    )
    alone = massive_summary_figure(stats, None)
    assert [t.name for t in alone.data] == ["largest |h|", "median |h|"]
    assert alone.layout.yaxis.type == "log"
    sinks = SimpleNamespace(share_per_layer=np.array([0.5, 0.75]), layer_numbers=(1, 2))
    both = massive_summary_figure(stats, sinks)
    assert [t.type for t in both.data] == ["scatter", "scatter", "bar"]
    assert list(both.data[2].x) == ["1", "2"] and list(both.data[2].y) == [0.5, 0.75]
