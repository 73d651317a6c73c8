"""Axis settings shared by every figure builder.

Log axes: Plotly's default labels the minor ticks between decades with bare digits ("2", "5"), so
a tick at 0.5 reads as 5 and one at 20 as 2. Every log axis goes through :func:`log_axis`, which
labels every tick with its full value (0.5, 2, 20, 500) and the decades as usual.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import plotly.graph_objects as go

# What a log axis of an isoscope figure carries (tests check every log axis for it).
LOG_AXIS = {"type": "log", "minorloglabels": "complete"}


def log_axis(fig: go.Figure, axis: Literal["x", "y"] = "y", **where) -> go.Figure:
    """Make ``fig``'s ``axis`` axes logarithmic with full-value tick labels (:data:`LOG_AXIS`);
    ``where`` selects subplots as ``update_yaxes`` does (``row=1, col=1``). Returns ``fig``."""
    update = fig.update_yaxes if axis == "y" else fig.update_xaxes
    update(**LOG_AXIS, **where)
    return fig


def lowest(values) -> float:
    """The smallest finite value of ``values`` for an axis range; 0.0 when none is finite (an
    undefined metric, e.g. anisotropy of a one-text corpus, leaves the axis at its default)."""
    array = np.asarray(values, dtype=float)
    finite = array[np.isfinite(array)]
    return float(finite.min()) if finite.size else 0.0
