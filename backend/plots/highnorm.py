"""Figures of massive activations and high-norm tokens in image models
(:mod:`backend.analysis.activations.highnorm`): norms by kind of token, their distribution, and the
patch norms drawn over the image."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from backend.analysis.activations.highnorm import IMAGE_CARRIERS, ImageScan, token_kind

_KIND_COLOURS = {
    "CLS": "#d62728",
    "distillation": "#9467bd",
    "register": "#2ca02c",
    "patch": "#1f77b4",
}


def norm_by_kind_figure(scan: ImageScan) -> go.Figure:
    """Mean L2 norm per hidden state of each kind of token ([CLS], registers, patches)."""
    x = list(scan.massive.state_names)
    fig = go.Figure()
    for kind, values in scan.norm_by_kind().items():
        fig.add_trace(
            go.Scatter(
                x=x,
                y=values,
                name=kind,
                mode="lines+markers",
                line={"color": _KIND_COLOURS[kind]},
            )
        )
    fig.update_layout(
        title="Mean token norm by kind of token",
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="‖h‖",
        height=360,
        margin={"t": 50, "b": 40},
    )
    return fig


def norm_histogram(scan: ImageScan, state: int, threshold: float) -> go.Figure:
    """Distribution of token norms at ``state`` by kind of token (Darcet et al., Fig. 3: a second
    mode of high-norm patches), with the high-norm threshold."""
    kinds = np.array([token_kind(n) for n in scan.token_names])
    fig = go.Figure()
    for kind in IMAGE_CARRIERS:
        mask = kinds == kind
        if mask.any():
            fig.add_trace(
                go.Histogram(
                    x=scan.norms[state][:, mask].reshape(-1),
                    name=kind,
                    marker_color=_KIND_COLOURS[kind],
                    opacity=0.75,
                    nbinsx=60,
                )
            )
    fig.add_vline(x=threshold, line_dash="dash", line_color="#555555")
    fig.update_layout(
        barmode="overlay",
        title=f"Token norms at hidden state {scan.massive.state_names[state]}",
        xaxis_title="‖h‖",
        yaxis_title="tokens",
        yaxis_type="log",
        height=340,
        margin={"t": 50, "b": 40},
    )
    return fig


def image_norm_overlay(
    image: np.ndarray, patch_norms: np.ndarray, threshold: float, title: str = ""
) -> go.Figure:
    """The image as the model sees it (uint8 (H, W, 3)) under a heat map of its patch norms
    ((rows, cols)); patches above ``threshold`` are circled."""
    height, width = image.shape[:2]
    rows, cols = patch_norms.shape
    ph, pw = height / rows, width / cols
    centre_x = (np.arange(cols) + 0.5) * pw
    centre_y = (np.arange(rows) + 0.5) * ph
    low, high = float(np.min(patch_norms)), float(np.max(patch_norms))
    if high - low < 1e-3 * max(abs(high), 1e-12):  # equal norms (a final LayerNorm): one colour,
        low, high = low * 0.99, high * 1.01  # on a scale that reads, not 7.9999992 ... 8.0000008
    fig = go.Figure(go.Image(z=image, hoverinfo="skip"))
    fig.add_trace(
        go.Heatmap(
            z=patch_norms,
            x=centre_x,
            y=centre_y,
            zmin=low,
            zmax=high,
            colorscale="Inferno",
            opacity=0.55,
            colorbar={"title": "‖h‖", "tickformat": ".4~g"},
            hovertemplate="patch at x %{x:.0f}, y %{y:.0f} px<br>‖h‖ %{z:.2f}<extra></extra>",
        )
    )
    high_r, high_c = np.nonzero(patch_norms > threshold)
    fig.add_trace(
        go.Scatter(
            x=centre_x[high_c],
            y=centre_y[high_r],
            mode="markers",
            marker={"symbol": "circle-open", "size": 14, "color": "#00e5ff", "line": {"width": 2}},
            name="high-norm patch",
            text=[
                f"patch r{r}c{c}: ‖h‖ {patch_norms[r, c]:.1f}"
                for r, c in zip(high_r, high_c, strict=True)
            ],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"visible": False, "range": [0, width]},
        yaxis={"visible": False, "range": [height, 0], "scaleanchor": "x"},
        height=480,
        margin={"t": 50, "b": 10, "l": 10, "r": 10},
        showlegend=False,
    )
    return fig


def high_norm_frame(scan: ImageScan, thresholds: np.ndarray) -> pd.DataFrame:
    """One row per hidden state: median and largest patch norm, the threshold, the share of
    patches above it, the mean norm of each kind of token."""
    patches = scan.norms[:, :, scan.prefix :].reshape(scan.norms.shape[0], -1)
    shares = scan.high_norm_share(thresholds)
    by_kind = scan.norm_by_kind()
    rows = []
    for s, name in enumerate(scan.massive.state_names):
        row = {
            "hidden state": name,
            "median patch norm": round(float(np.median(patches[s])), 3),
            "largest patch norm": round(float(patches[s].max()), 3),
            "threshold": round(float(thresholds[s]), 3),
            "high-norm patches": round(float(shares[s]), 4),
        }
        row |= {f"mean norm: {k}": round(float(v[s]), 3) for k, v in by_kind.items()}
        rows.append(row)
    return pd.DataFrame(rows)
