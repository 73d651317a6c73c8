"""Vertical marker lines for many positions at once.

``fig.add_vline`` validates and copies every shape already in the figure on each call, so a loop
over dozens of outlier dimensions costs more than the rest of a page rerun (docs/performance.md,
"Interaction latency"). These build the same shapes as plain dicts, set once.
"""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go


def add_vlines(
    fig: go.Figure,
    xs: Iterable[float],
    line: dict,
    labels: Iterable[str] | None = None,
) -> go.Figure:
    """Full-height vertical lines at ``xs`` (data x; y over the axis's domain, as ``add_vline``
    draws them), with an optional label above each."""
    xs = list(xs)
    shapes = [
        dict(type="line", xref="x", yref="y domain", x0=x, x1=x, y0=0, y1=1, line=line) for x in xs
    ]
    layout: dict = {"shapes": list(fig.layout.shapes or ()) + shapes}
    if labels is not None:
        notes = [
            dict(
                x=x,
                y=1,
                xref="x",
                yref="y domain",
                text=str(text),
                showarrow=False,
                xanchor="center",
                yanchor="bottom",
            )
            for x, text in zip(xs, labels, strict=True)
        ]
        layout["annotations"] = list(fig.layout.annotations or ()) + notes
    fig.update_layout(layout)
    return fig
