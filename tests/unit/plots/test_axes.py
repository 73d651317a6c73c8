"""Every log axis labels its ticks with full values (0.5, 2, 20), never the bare minor digits
("5", "2") Plotly draws by default between decades: each figure with a log axis goes through
:func:`isoscope.plots.axes.log_axis`, checked on the built figures and in the source."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from isoscope.analysis.positional.nope import VarianceCurves
from isoscope.plots.axes import LOG_AXIS, log_axis
from isoscope.plots.highnorm import norm_histogram
from isoscope.plots.massive import magnitudes_by_layer_figure, massive_summary_figure
from isoscope.plots.positional import variance_plot
from isoscope.plots.quant import scheme_figure
from tests.unit.analysis.massive.test_highnorm import planted_scan
from tests.unit.plots.test_quant import _report

ROOT = Path(__file__).resolve().parents[3]
# any way of asking Plotly for a log axis: type="log", yaxis_type="log", {"type": "log"}, log_y=True
LOG_REQUEST = re.compile(r"""type["']?\s*[=:]\s*["']log["']|\blog_[xy]\s*=\s*True""")


def _curves(layers: int = 2, positions: int = 40) -> VarianceCurves:
    m = np.arange(1, positions + 1, dtype=np.float64)
    mean = np.stack([1.0 / m * (i + 1) for i in range(layers)])
    return VarianceCurves(
        positions=m,
        attn_mean=mean,
        attn_std=0.1 * mean,
        resid_mean=mean + 1.0,
        resid_std=0.1 * mean,
        attn_per_seed=mean[None],
        theory=1.0 / m,
        slopes=np.full(layers, -1.0),
        resid_slopes=np.zeros(layers),
        fit_range=(2, positions),
        counts=np.full(positions, 3),
        causal=True,
        description="synthetic",
        weight_stds={},
        seconds=0.0,
        settings={},
    )


def _log_axes(fig: go.Figure) -> list:
    layout = fig.to_dict()["layout"]
    return [
        (name, axis)
        for name, axis in layout.items()
        if re.fullmatch(r"[xy]axis\d*", name) and axis.get("type") == "log"
    ]


FIGURES = {
    "massive activations by layer": lambda: magnitudes_by_layer_figure(planted_scan().massive),
    "token-norm histogram": lambda: norm_histogram(planted_scan(), 1, 5.0),
    "variance vs position (attention)": lambda: variance_plot(_curves(), "attn"),
    "variance vs position (residual)": lambda: variance_plot(_curves(), "resid"),
    "quantization schemes": lambda: scheme_figure(_report("kl")),
    "report: massive activations": lambda: massive_summary_figure(planted_scan().massive, None),
}
EXPECTED_LOG_AXES = {
    "massive activations by layer": {"yaxis"},
    "token-norm histogram": {"yaxis"},
    "variance vs position (attention)": {"xaxis", "yaxis"},
    "variance vs position (residual)": {"xaxis", "yaxis"},
    "quantization schemes": {"yaxis"},
    "report: massive activations": {"yaxis"},
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_log_axis_labels_full_values(name):
    axes = _log_axes(FIGURES[name]())
    assert {axis_name for axis_name, _ in axes} == EXPECTED_LOG_AXES[name]
    for axis_name, axis in axes:
        assert axis.get("minorloglabels") == LOG_AXIS["minorloglabels"] == "complete", axis_name


def test_log_axis_touches_only_the_axis_asked_for():
    fig = log_axis(go.Figure(go.Scatter(x=[1, 10], y=[0.5, 50])), "x")
    layout = fig.to_dict()["layout"]
    assert layout["xaxis"] == {"type": "log", "minorloglabels": "complete"}
    assert "yaxis" not in layout or layout["yaxis"].get("type") != "log"


def test_no_figure_asks_plotly_for_a_log_axis_without_the_helper():
    """The built figures above cover today's builders; this catches the next one, in the figure
    builders and the Streamlit glue and pages alike."""
    sources = [*(ROOT / "backend").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]
    sources += [*(ROOT / "pages").glob("*.py"), ROOT / "app.py"]
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        if path != ROOT / "backend" / "plots" / "axes.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if LOG_REQUEST.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == [], "use isoscope.plots.axes.log_axis for " + ", ".join(offenders)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.3, float("nan"), -0.1], -0.1),
        ([float("nan"), float("nan")], 0.0),
        ([], 0.0),
        ([2.0], 2.0),
    ],
)
def test_lowest_ignores_undefined_values(values, expected):
    """An axis range from a metric that is undefined at some or all states (NaN) stays finite."""
    from isoscope.plots.axes import lowest

    assert lowest(values) == expected
