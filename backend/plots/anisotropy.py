"""Figures and tables of the Anisotropy page: cosine histograms, isotropy metrics by layer,
the dimensions that carry the cosine (Timkey & van Schijndel), and the mean-cosine vs IsoScore contrast.

Builders take :class:`isoscope.analysis.anisotropy.StateIsotropy` objects (or plain arrays) and return
``plotly.graph_objects.Figure``; the ``*_frame`` helpers give the data behind each chart for CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from isoscope.analysis.anisotropy import StateIsotropy, top_cosine_dims
from isoscope.plots.axes import lowest

# One colour per series, the same on every chart of the page.
SERIES_COLOURS = {
    "raw": "#1f77b4",
    "processed": "#ff7f0e",
    "random init": "#7f7f7f",
    "random init, processed": "#bcbd22",
}
METRICS = {
    "anisotropy": "Anisotropy (mean cosine of random pairs)",
    "isoscore": "IsoScore",
    "self_similarity_adjusted": "Self-similarity, adjusted (minus anisotropy)",
    "intra_similarity_adjusted": "Intra-text similarity, adjusted (minus anisotropy)",
}
_MARGIN = dict(l=50, r=20, t=60, b=40)


def _colour(series: str, i: int) -> str:
    return SERIES_COLOURS.get(series, ["#2ca02c", "#d62728", "#9467bd", "#8c564b"][i % 4])


# ----------------------------------------------------------------------------- histograms


def cosine_histogram_figure(series: dict[str, StateIsotropy], state: int) -> go.Figure:
    """Overlaid histograms (share of pairs per bin) of random-pair cosines at hidden ``state``;
    dashed lines mark each series' mean (the anisotropy), also given in the legend."""
    fig = go.Figure()
    state_name = next(iter(series.values())).state_names[state]
    for i, (label, iso) in enumerate(series.items()):
        edges = iso.histogram_edges
        counts = iso.histogram_counts[state]
        share = counts / max(int(counts.sum()), 1)
        colour = _colour(label, i)
        mean = float(iso.anisotropy[state])
        fig.add_trace(
            go.Bar(
                x=(edges[:-1] + edges[1:]) / 2,
                y=share,
                width=np.diff(edges),
                name=f"{label} (mean {mean:.3f})",
                marker_color=colour,
                opacity=0.55,
                customdata=np.stack([edges[:-1], edges[1:], counts], axis=1),
                hovertemplate=(
                    "cosine %{customdata[0]:.2f} to %{customdata[1]:.2f}<br>%{y:.1%} "
                    "of pairs (%{customdata[2]})<extra>"
                )
                + label
                + "</extra>",
            )
        )
        if np.isfinite(mean):
            fig.add_vline(x=mean, line_dash="dash", line_color=colour)
    fig.update_layout(
        title=f"Cosine similarity of random token pairs from different texts · hidden state {state_name}",
        barmode="overlay",
        xaxis_title="cosine similarity",
        yaxis_title="share of pairs",
        xaxis_range=[-1, 1],
        yaxis_tickformat=".0%",
        height=380,
        margin=_MARGIN,
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def histogram_small_multiples(series: dict[str, StateIsotropy], columns: int = 4) -> go.Figure:
    """One small histogram per hidden state (all series overlaid), shared axes."""
    first = next(iter(series.values()))
    names = first.state_names
    rows = int(np.ceil(len(names) / columns))
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[f"state {n}" for n in names],
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=0.12 / max(rows, 1) * 2,
    )
    for i, (label, iso) in enumerate(series.items()):
        edges = iso.histogram_edges
        centres = (edges[:-1] + edges[1:]) / 2
        for s in range(len(names)):
            counts = iso.histogram_counts[s]
            fig.add_trace(
                go.Bar(
                    x=centres,
                    y=counts / max(int(counts.sum()), 1),
                    width=np.diff(edges),
                    name=label,
                    legendgroup=label,
                    showlegend=s == 0,
                    marker_color=_colour(label, i),
                    opacity=0.55,
                    hovertemplate=f"state {names[s]} · "
                    + "cosine %{x:.2f}: %{y:.1%}<extra>"
                    + label
                    + "</extra>",
                ),
                row=s // columns + 1,
                col=s % columns + 1,
            )
    fig.update_layout(
        title="Random-pair cosine histograms, every hidden state",
        barmode="overlay",
        height=230 * rows + 80,
        margin=_MARGIN,
        legend=dict(orientation="h", y=-0.08),
    )
    top = max(
        float(
            (
                iso.histogram_counts
                / np.maximum(iso.histogram_counts.sum(axis=1, keepdims=True), 1)
            ).max()
        )
        for iso in series.values()
    )
    fig.update_xaxes(range=[-1, 1])
    fig.update_yaxes(tickformat=".0%", range=[0, 1.08 * top if top > 0 else 1])
    return fig


def histogram_frame(series: dict[str, StateIsotropy]) -> pd.DataFrame:
    """Long table behind the histograms: series, state, bin edges, count, share."""
    rows = []
    for label, iso in series.items():
        edges = iso.histogram_edges
        for s, name in enumerate(iso.state_names):
            total = max(int(iso.histogram_counts[s].sum()), 1)
            for b, count in enumerate(iso.histogram_counts[s]):
                rows.append(
                    {
                        "series": label,
                        "state": name,
                        "bin_left": edges[b],
                        "bin_right": edges[b + 1],
                        "count": int(count),
                        "share": count / total,
                    }
                )
    return pd.DataFrame(
        rows, columns=["series", "state", "bin_left", "bin_right", "count", "share"]
    )


# ----------------------------------------------------------------------------- metrics by layer


def metrics_frame(series: dict[str, StateIsotropy]) -> pd.DataFrame:
    """One row per (series, hidden state) with every scalar metric."""
    frames = [iso.to_frame().assign(series=label) for label, iso in series.items()]
    frame = pd.concat(frames, ignore_index=True)
    return frame[["series", *[c for c in frame.columns if c != "series"]]]


def metrics_by_layer_figure(
    series: dict[str, StateIsotropy], metrics: Sequence[str] = tuple(METRICS)
) -> go.Figure:
    """Small multiples, one panel per metric, one line per series (raw, processed, random init ...)."""
    metrics = list(metrics)
    cols = 2 if len(metrics) > 1 else 1
    rows = int(np.ceil(len(metrics) / cols))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[METRICS.get(m, m) for m in metrics],
        horizontal_spacing=0.08,
        vertical_spacing=0.16,
    )
    for i, (label, iso) in enumerate(series.items()):
        frame = iso.to_frame()
        dash = "dot" if "random" in label else ("dash" if "processed" in label else "solid")
        for m, metric in enumerate(metrics):
            fig.add_trace(
                go.Scatter(
                    x=frame["state"],
                    y=frame[metric],
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=m == 0,
                    line=dict(color=_colour(label, i), dash=dash),
                    hovertemplate="state %{x}: %{y:.3f}<extra>" + label + "</extra>",
                ),
                row=m // cols + 1,
                col=m % cols + 1,
            )
    fig.update_layout(
        title="Isotropy metrics by hidden state",
        height=320 * rows + 60,
        margin=_MARGIN,
        legend=dict(orientation="h", y=-0.12),
    )
    fig.update_xaxes(title_text="hidden state", type="category")
    return fig


# ----------------------------------------------------------------------------- Timkey


def contribution_frame(iso: StateIsotropy, k: int = 5) -> pd.DataFrame:
    """Top-``k`` dims per hidden state with their expected cosine contribution and share (Timkey)."""
    rows = []
    for s, name in enumerate(iso.state_names):
        for rank, (dim, share) in enumerate(top_cosine_dims(iso.contributions[s], k), start=1):
            rows.append(
                {
                    "state": name,
                    "rank": rank,
                    "dim": dim,
                    "contribution": float(iso.contributions[s, dim]),
                    "share_of_mean_cosine": share,
                    "anisotropy": float(iso.anisotropy[s]),
                }
            )
    return pd.DataFrame(
        rows, columns=["state", "rank", "dim", "contribution", "share_of_mean_cosine", "anisotropy"]
    )


def cosine_contribution_figure(iso: StateIsotropy, k: int = 5) -> go.Figure:
    """Stacked bars per hidden state: the expected cosine contribution of each top-``k`` dim (one colour
    per dim, so a rogue dim is recognisable across layers) and of all other dims; bars sum to the anisotropy."""
    frame = contribution_frame(iso, k)
    names = list(iso.state_names)
    fig = go.Figure()
    palette = px.colors.qualitative.Dark24 + px.colors.qualitative.Light24  # no repeats for 48 dims
    dims = list(dict.fromkeys(frame.sort_values(["rank", "state"])["dim"].tolist()))
    top_sum = np.zeros(len(names))
    for i, dim in enumerate(dims):
        part = frame[frame["dim"] == dim].set_index("state")
        y = np.array([part["contribution"].get(n, 0.0) for n in names])
        share = np.array([part["share_of_mean_cosine"].get(n, np.nan) for n in names])
        top_sum += y
        fig.add_trace(
            go.Bar(
                x=names,
                y=y,
                name=f"dim {dim}",
                marker_color=palette[i % len(palette)],
                customdata=share,
                hovertemplate=f"dim {dim}"
                + " · state %{x}<br>contribution %{y:.4f} (%{customdata:.1%} of the mean cosine)<extra></extra>",
            )
        )
    rest = np.nan_to_num(iso.anisotropy) - top_sum
    fig.add_trace(
        go.Bar(
            x=names,
            y=rest,
            name="all other dims",
            marker_color="#c7c7c7",
            hovertemplate="all other dims · state %{x}: %{y:.4f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=iso.anisotropy,
            mode="markers",
            name="anisotropy (total)",
            marker=dict(symbol="diamond", color="black", size=9),
            hovertemplate="state %{x}: mean cosine %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Which dimensions carry the cosine? Top {k} dims per hidden state (Timkey & van Schijndel 2021)",
        barmode="relative",
        xaxis_title="hidden state",
        yaxis_title="expected contribution to the mean cosine",
        xaxis_type="category",
        height=400,
        margin=_MARGIN,
        legend=dict(orientation="h", y=-0.22),
    )
    return fig


# ----------------------------------------------------------------------------- contrast


def contrast_frame(raw: StateIsotropy, centered: StateIsotropy) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "state": list(raw.state_names),
            "anisotropy_raw": raw.anisotropy,
            "anisotropy_mean_centered": centered.anisotropy,
            "isoscore_raw": raw.isoscore,
            "isoscore_mean_centered": centered.isoscore,
        }
    )


def mean_shift_contrast_figure(raw: StateIsotropy, centered: StateIsotropy) -> go.Figure:
    """Mean cosine vs IsoScore before and after subtracting the mean vector, per hidden state.

    Mean-centering moves every vector by the same amount: the mean cosine collapses to ~0, while
    IsoScore (a function of the covariance only) does not change at all.
    """
    frame = contrast_frame(raw, centered)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=["Mean cosine (anisotropy)", "IsoScore"],
        horizontal_spacing=0.1,
    )
    for col, (metric, colours) in enumerate(
        [("anisotropy", ("#1f77b4", "#aec7e8")), ("isoscore", ("#2ca02c", "#98df8a"))], start=1
    ):
        for (suffix, label), colour in zip(
            [("raw", "raw"), ("mean_centered", "mean-centred")], colours, strict=True
        ):
            fig.add_trace(
                go.Bar(
                    x=frame["state"],
                    y=frame[f"{metric}_{suffix}"],
                    name=f"{metric}, {label}",
                    marker_color=colour,
                    hovertemplate="state %{x}: %{y:.3f}<extra>" + f"{metric}, {label}" + "</extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_layout(
        title="Shifting the mean changes the mean cosine, not IsoScore",
        barmode="group",
        height=360,
        margin=_MARGIN,
        legend=dict(orientation="h", y=-0.2),
    )
    fig.update_xaxes(type="category", title_text="hidden state")
    fig.update_yaxes(range=[min(0.0, lowest(frame["anisotropy_mean_centered"])) - 0.02, 1.0], col=2)
    return fig
