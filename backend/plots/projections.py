"""Figures of the Clipping & projections page: raw and post-processed projections side by side.

WebGL scatter (``Scattergl``) so tens of thousands of points stay smooth. Both panels show the
same points with the same colours; a categorical legend entry toggles the category in both.
"""

from __future__ import annotations

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.projections import Colouring, Projection

PALETTE = plotly.colors.qualitative.Plotly + plotly.colors.qualitative.D3
OTHER_COLOUR = "#c7c7c7"


def category_colours(order: tuple[str, ...]) -> dict[str, str]:
    """A fixed colour per category (legend order); 'other …' categories are grey."""
    colours, k = {}, 0
    for name in order:
        if name.startswith("other"):
            colours[name] = OTHER_COLOUR
        else:
            colours[name] = PALETTE[k % len(PALETTE)]
            k += 1
    return colours


def axis_titles(projection: Projection) -> tuple[str, str]:
    if projection.explained_variance_ratio is not None:
        r = projection.explained_variance_ratio
        return f"PC1 ({100 * r[0]:.1f} % of variance)", f"PC2 ({100 * r[1]:.1f} %)"
    return f"{projection.label} 1", f"{projection.label} 2"


def before_after_figure(
    before: Projection,
    after: Projection,
    colouring: Colouring,
    hover: np.ndarray,
    titles: tuple[str, str] = ("raw", "post-processed"),
    point_size: float = 4.0,
    height: int = 560,
) -> go.Figure:
    """Two WebGL scatter panels (raw | processed) of the same points, coloured alike.

    ``hover`` holds one label per point (a token in its context, or a text snippet).
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.07)
    panels = ((before, 1), (after, 2))
    hover = np.asarray(hover, dtype=object)
    if colouring.kind == "categorical":
        colours = category_colours(colouring.order)
        for name in colouring.order:
            mask = colouring.values == name
            for projection, col in panels:
                fig.add_trace(go.Scattergl(
                    x=projection.coords[mask, 0], y=projection.coords[mask, 1], mode="markers",
                    marker=dict(size=point_size, color=colours[name], opacity=0.75),
                    name=str(name), legendgroup=str(name), showlegend=col == 1,
                    customdata=hover[mask], hovertemplate="%{customdata}<br>" + f"{name}<extra></extra>",
                ), row=1, col=col)
    else:
        values = np.asarray(colouring.values, dtype=np.float64)
        lo, hi = (float(np.nanmin(values)), float(np.nanmax(values))) if len(values) else (0.0, 1.0)
        for projection, col in panels:
            fig.add_trace(go.Scattergl(
                x=projection.coords[:, 0], y=projection.coords[:, 1], mode="markers",
                marker=dict(size=point_size, color=values, colorscale="Viridis", cmin=lo, cmax=hi, opacity=0.8,
                            showscale=col == 2, colorbar=dict(title=dict(text=colouring.label, side="right"), thickness=12)),
                customdata=np.stack([hover, values], axis=1),
                hovertemplate="%{customdata[0]}<br>" + colouring.label + ": %{customdata[1]:.3g}<extra></extra>",
                showlegend=False, name=colouring.label,
            ), row=1, col=col)
    for projection, col in panels:
        x_title, y_title = axis_titles(projection)
        fig.update_xaxes(title_text=x_title, row=1, col=col, zeroline=False)
        fig.update_yaxes(title_text=y_title, row=1, col=col, zeroline=False)
    fig.update_layout(
        height=height, margin=dict(l=50, r=20, t=60, b=50),
        legend=dict(orientation="h", yanchor="top", y=-0.14, itemsizing="constant", title=dict(text=colouring.label + ": ")),
        hoverlabel=dict(namelength=-1),
    )
    return fig


def explained_variance_text(projection: Projection) -> str:
    """One line under a panel: PCA variance shares, or what the 50-dim pre-PCA kept."""
    if projection.explained_variance_ratio is not None:
        r = projection.explained_variance_ratio
        return f"PCA: the two axes hold {100 * (r[0] + r[1]):.1f} % of the variance"
    if projection.pre_pca_variance is not None:
        return f"{projection.label} on a 50-dim PCA holding {100 * projection.pre_pca_variance:.1f} % of the variance"
    return f"{projection.label} on the full vectors"
