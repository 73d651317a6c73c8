"""Figures of the Clipping & projections page: raw and post-processed projections side by side.

WebGL scatter (``Scattergl``) so tens of thousands of points stay smooth. Both panels show the
same points with the same colours; a categorical legend entry toggles the category in both.
Image analyses can carry a small thumbnail per patch point (:func:`patch_thumbnails`), shown on
hover by the live chart (ui/widgets/frontend/live_chart.html): the images travel once, in
``layout.meta.thumbnails``, and each trace maps its point indices to them in
``meta.thumbnail_of``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

from isoscope.analysis.projections.methods import Colouring, Projection
from isoscope.engine.extraction.media import patch_pixels

THUMBNAIL_POINTS = 1000  # patch thumbnails per figure at most
THUMBNAIL_BYTES = 1 << 20  # and at most this many bytes of them (base64 PNG)

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
    thumbnails: Sequence[str] | None = None,
) -> go.Figure:
    """Two WebGL scatter panels (raw | processed) of the same points, coloured alike.

    ``hover`` holds one label per point (a token in its context, or a text snippet). Built from
    plain dicts without plotly's per-property validation: with tens of thousands of points that
    validation (and make_subplots) costs more than the whole rest of a page rerun. Coordinates and
    colour values travel as float32 (Plotly sends numpy arrays as typed binary: half the bytes of
    float64, and a screen cannot show the difference). ``thumbnails``: one data URI per point
    ("" for none), shown on hover by the live chart (module doc).
    """
    panels = (
        (np.asarray(before.coords, dtype=np.float32), "x", "y"),
        (np.asarray(after.coords, dtype=np.float32), "x2", "y2"),
    )
    hover = np.asarray(hover).astype(
        str
    )  # fixed-width str: copied as one block, unlike Python objects
    uris = [uri for uri in (thumbnails or ()) if uri]
    thumbnail_index = np.full(len(hover), -1, dtype=np.int64)
    if uris:
        has = np.array([bool(uri) for uri in (thumbnails or ())])  # uris: thumbnails given
        thumbnail_index[has] = np.arange(int(has.sum()))
    if colouring.kind == "categorical":
        traces = _categorical_traces(panels, colouring, hover, point_size, thumbnail_index)
    else:
        traces = _continuous_traces(panels, colouring, hover, point_size, thumbnail_index)
    layout = _two_panel_layout(before, after, colouring, titles, height, uris)
    return go.Figure(data=traces, layout=layout, _validate=False)


def _categorical_traces(
    panels: tuple, colouring: Colouring, hover: np.ndarray, point_size: float, thumbs: np.ndarray
) -> list[dict]:
    """One trace per category and panel, sharing a legend entry; grey "other" points first."""
    traces: list[dict] = []
    colours = category_colours(colouring.order)
    rank = {name: i for i, name in enumerate(colouring.order)}
    # grey "other …" points are drawn first (underneath); the legend keeps the given order
    for name in sorted(colouring.order, key=lambda c: (not c.startswith("other"), rank[c])):
        mask = colouring.values == name
        for coords, xa, ya in panels:
            traces.append(
                dict(
                    type="scattergl",
                    x=coords[mask, 0],
                    y=coords[mask, 1],
                    xaxis=xa,
                    yaxis=ya,
                    mode="markers",
                    marker=dict(size=point_size, color=colours[name], opacity=0.75),
                    name=str(name),
                    legendgroup=str(name),
                    legendrank=rank[name],
                    showlegend=xa == "x",
                    hovertext=hover[mask],
                    hovertemplate="%{hovertext}<br>" + f"{name}<extra></extra>",
                    **_thumbnail_meta(np.flatnonzero(mask), thumbs),
                )
            )
    return traces


def _continuous_traces(
    panels: tuple, colouring: Colouring, hover: np.ndarray, point_size: float, thumbs: np.ndarray
) -> list[dict]:
    """One trace per panel on one Viridis scale (its colour bar beside the right panel)."""
    traces: list[dict] = []
    values = np.asarray(colouring.values, dtype=np.float32)
    lo, hi = (float(np.nanmin(values)), float(np.nanmax(values))) if len(values) else (0.0, 1.0)
    for coords, xa, ya in panels:
        traces.append(
            dict(
                type="scattergl",
                x=coords[:, 0],
                y=coords[:, 1],
                xaxis=xa,
                yaxis=ya,
                mode="markers",
                marker=dict(
                    size=point_size,
                    color=values,
                    colorscale="Viridis",
                    cmin=lo,
                    cmax=hi,
                    opacity=0.8,
                    showscale=xa == "x2",
                    colorbar=dict(title=dict(text=colouring.label, side="right"), thickness=12),
                ),
                hovertext=hover,
                customdata=values,
                hovertemplate="%{hovertext}<br>"
                + colouring.label
                + ": %{customdata:.3g}<extra></extra>",
                showlegend=False,
                name=colouring.label,
                **_thumbnail_meta(np.arange(len(values)), thumbs),
            )
        )
    return traces


def _panel_title(text: str, x: float) -> dict:
    return dict(
        text=text,
        x=x,
        y=1.0,
        xref="paper",
        yref="paper",
        xanchor="center",
        yanchor="bottom",
        showarrow=False,
        font=dict(size=15),
    )


def _two_panel_layout(
    before: Projection,
    after: Projection,
    colouring: Colouring,
    titles: tuple[str, str],
    height: int,
    uris: list[str],
) -> dict:
    """Side-by-side axes titled by each projection, the panel titles above, the legend below,
    the thumbnails (if any) in ``meta``."""
    (bx, by), (ax, ay) = axis_titles(before), axis_titles(after)
    gap = 0.07
    return dict(
        height=height,
        margin=dict(l=50, r=20, t=60, b=50),
        xaxis=dict(domain=[0.0, 0.5 - gap / 2], anchor="y", title=dict(text=bx), zeroline=False),
        yaxis=dict(domain=[0.0, 1.0], anchor="x", title=dict(text=by), zeroline=False),
        xaxis2=dict(domain=[0.5 + gap / 2, 1.0], anchor="y2", title=dict(text=ax), zeroline=False),
        yaxis2=dict(domain=[0.0, 1.0], anchor="x2", title=dict(text=ay), zeroline=False),
        annotations=[
            _panel_title(titles[0], 0.25 - gap / 4),
            _panel_title(titles[1], 0.75 + gap / 4),
        ],
        legend=dict(
            orientation="h",
            yanchor="top",
            y=-0.14,
            itemsizing="constant",
            title=dict(text=colouring.label + ": "),
        ),
        hoverlabel=dict(namelength=-1),
        meta=dict(thumbnails=uris) if uris else None,
        template=pio.templates[pio.templates.default] if pio.templates.default else None,
    )


def _thumbnail_meta(points: np.ndarray, thumbnail_index: np.ndarray) -> dict:
    """A trace's ``meta``: its point index -> index into ``layout.meta.thumbnails`` (only the
    points that have one; nothing at all when none does)."""
    index = thumbnail_index[points]
    mine = np.flatnonzero(index >= 0)
    if not len(mine):
        return {}
    return {"meta": {"thumbnail_of": {str(int(i)): int(index[i]) for i in mine}}}


def png_data_uri(pixels: np.ndarray) -> str:
    """A uint8 (h, w, 3) image as a ``data:image/png;base64`` URI."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def patch_thumbnails(
    view_of: Callable[[int], np.ndarray],
    image_id: np.ndarray,
    patch_index: np.ndarray,
    grid: tuple[int, int],
    max_points: int = THUMBNAIL_POINTS,
    max_bytes: int = THUMBNAIL_BYTES,
) -> list[str]:
    """One thumbnail per point: the pixels of its patch in ``view_of(image)`` (the image as the
    model sees it), as a PNG data URI; "" for prefix tokens (``patch_index`` -1) and for the
    points past ``max_points`` thumbnails or ``max_bytes`` of them (in point order: the
    projection's points are a random sample already)."""
    out: list[str] = []
    total = count = 0
    for image, index in zip(np.asarray(image_id), np.asarray(patch_index), strict=True):
        uri = ""
        if index >= 0 and count < max_points and total < max_bytes:
            uri = png_data_uri(patch_pixels(view_of(int(image)), grid, int(index)))
            if total + len(uri) > max_bytes:
                total, uri = max_bytes, ""  # the budget is spent: no more thumbnails
            else:
                total, count = total + len(uri), count + 1
        out.append(uri)
    return out


def explained_variance_text(projection: Projection) -> str:
    """One line under a panel: PCA variance shares, or what the 50-dim pre-PCA kept."""
    if projection.explained_variance_ratio is not None:
        r = projection.explained_variance_ratio
        return f"PCA: the two axes hold {100 * (r[0] + r[1]):.1f} % of the variance"
    if projection.pre_pca_variance is not None:
        return f"{projection.label} on a 50-dim PCA holding {100 * projection.pre_pca_variance:.1f} % of the variance"
    return f"{projection.label} on the full vectors"
