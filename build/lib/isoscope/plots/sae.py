"""Figures of the SAE page (docs/methods.md section 16): fidelity by token kind, feature firing
frequencies, the features of one dimension, and the dense features against the mean direction
and the principal components."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from isoscope.analysis.sae.params import TOKEN_KINDS

KIND_LABELS = {
    "first_position": "first position",
    "massive": "massive-activation tokens",
    "special": "special tokens",
    "ordinary": "ordinary tokens",
}
KIND_COLORS = {
    "first_position": "#d62728",
    "massive": "#ff7f0e",
    "special": "#9467bd",
    "ordinary": "#1f77b4",
}


def fidelity_figure(fidelity: Mapping[str, Mapping[str, Any]]) -> go.Figure:
    """Two bar panels over the token kinds: FVU (left) and mean L0 (right); a kind without
    tokens shows no bar. Hover gives the token count."""
    from plotly.subplots import make_subplots

    kinds = [k for k in TOKEN_KINDS if fidelity[k]["tokens"]]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("FVU (lower is better)", "mean L0"))
    for col, key in ((1, "fvu"), (2, "l0")):
        fig.add_trace(
            go.Bar(
                x=[KIND_LABELS[k] for k in kinds],
                y=[fidelity[k][key] for k in kinds],
                marker_color=[KIND_COLORS[k] for k in kinds],
                customdata=[fidelity[k]["tokens"] for k in kinds],
                hovertemplate="%{x}<br>" + key + " %{y:.3g}<br>%{customdata} tokens<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
    fig.update_layout(height=320, margin=dict(l=40, r=20, t=40, b=40))
    return fig


def frequency_figure(frequency: np.ndarray, dense_share: float) -> go.Figure:
    """Histogram of log10 firing frequency over the features that fired, with the dense cut."""
    fired = frequency[frequency > 0]
    fig = go.Figure(
        go.Histogram(
            x=np.log10(fired),
            nbinsx=60,
            marker_color="#1f77b4",
            hovertemplate="log10 frequency %{x}<br>%{y} features<extra></extra>",
        )
    )
    fig.add_vline(
        x=float(np.log10(dense_share)),
        line_dash="dash",
        line_color="#d62728",
        annotation_text=f"dense (> {dense_share:g})",
    )
    fig.update_layout(
        height=300,
        xaxis_title="log10 share of tokens the feature fires on",
        yaxis_title="features",
        margin=dict(l=40, r=20, t=30, b=40),
    )
    return fig


def loadings_figure(dimension: Mapping[str, Any]) -> go.Figure:
    """Horizontal bars: the features of one dimension by loading W_dec[f, d] / ||W_dec[f]||,
    largest |loading| on top."""
    features = list(dimension["features"])[::-1]
    fig = go.Figure(
        go.Bar(
            x=[f["loading"] for f in features],
            y=[f"feature {f['feature']}" for f in features],
            orientation="h",
            marker_color=["#d62728" if f["loading"] < 0 else "#1f77b4" for f in features],
            customdata=[f["frequency"] for f in features],
            hovertemplate="%{y}<br>loading %{x:.3f}<br>fires on %{customdata:.2%}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(220, 28 * len(features) + 80),
        xaxis_title=f"loading on dim {dimension['dim']}",
        xaxis_range=[-1.05, 1.05],
        margin=dict(l=40, r=20, t=30, b=40),
    )
    return fig


def dense_figure(dense: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Dense features: cosine with the mean direction against firing frequency, colour the
    largest |cosine| with a top principal direction."""
    pcs = [max(d["cos_pcs"], default=0.0) for d in dense]
    fig = go.Figure(
        go.Scatter(
            x=[d["frequency"] for d in dense],
            y=[d["cos_mean"] for d in dense],
            mode="markers",
            marker=dict(
                color=pcs, colorscale="Viridis", cmin=0, cmax=1, size=10,
                colorbar=dict(title="max |cos| PC"),
            ),
            text=[f"feature {d['feature']}" for d in dense],
            hovertemplate="%{text}<br>fires on %{x:.1%}<br>cos with mean %{y:.3f}"
            "<br>max |cos| with a top PC %{marker.color:.3f}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(
        height=320,
        xaxis_title="share of tokens it fires on",
        yaxis_title="cosine with the mean direction",
        yaxis_range=[-1.05, 1.05],
        margin=dict(l=40, r=20, t=30, b=40),
    )
    return fig
