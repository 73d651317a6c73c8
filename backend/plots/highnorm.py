"""Figures of massive activations and high-norm tokens in image and speech models
(:mod:`isoscope.analysis.massive.highnorm`): norms by kind of token, their distribution, the
patch norms drawn over the image, and a clip's frame norms on a time axis under its waveform."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from isoscope.analysis.massive.highnorm import IMAGE_CARRIERS, AudioScan, ImageScan, token_kind
from isoscope.plots.axes import log_axis

WAVEFORM_POINTS = 4000  # a drawn waveform's points: a min/max envelope past this many samples

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
        height=340,
        margin={"t": 50, "b": 40},
    )
    return log_axis(fig, "y")


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


def _envelope(samples: np.ndarray, rate: int, points: int) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) of a waveform to draw: every sample, or past ``points`` samples each
    bucket's min then max (the envelope keeps the peaks a stride would drop)."""
    n = len(samples)
    if n <= points:
        return np.arange(n) / rate, samples
    buckets = points // 2
    edges = np.linspace(0, n, buckets + 1).astype(int)
    lows = np.minimum.reduceat(samples, edges[:-1])
    highs = np.maximum.reduceat(samples, edges[:-1])
    times = np.repeat(edges[:-1] / rate, 2)
    return times, np.column_stack([lows, highs]).reshape(-1)


def clip_norm_figure(
    scan: AudioScan, clip: int, state: int, threshold: float, title: str = ""
) -> go.Figure:
    """A clip's waveform (top) over its own frames' norms at ``state`` (bottom) on one time axis;
    frames above ``threshold`` are marked. Frames past the clip's end are not drawn (none exist
    in the scan)."""
    n = int(scan.frames[clip])
    times = scan.frame_times(clip)
    norms = scan.norms[state, clip, :n].astype(np.float64)
    t_wave, wave = _envelope(scan.waveforms[clip], scan.sampling_rate, WAVEFORM_POINTS)
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.4, 0.6], vertical_spacing=0.06
    )
    fig.add_trace(
        go.Scatter(
            x=t_wave, y=wave, mode="lines", name="waveform", line={"width": 1, "color": "#7f7f7f"}
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=times,
            y=norms,
            mode="lines+markers",
            name="frame norm",
            line={"color": "#1f77b4"},
            marker={"size": 4},
            hovertemplate="frame at %{x:.2f} s<br>‖h‖ %{y:.2f}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    high = np.flatnonzero(norms > threshold)
    fig.add_trace(
        go.Scatter(
            x=times[high],
            y=norms[high],
            mode="markers",
            name="high-norm frame",
            marker={"size": 10, "symbol": "circle-open", "color": "#d62728", "line": {"width": 2}},
        ),
        row=2,
        col=1,
    )
    fig.add_hline(y=threshold, line_dash="dash", line_color="#d62728", row=2, col=1)
    fig.update_yaxes(title_text="amplitude", row=1, col=1)
    fig.update_yaxes(title_text="‖h‖", row=2, col=1)
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    fig.update_layout(title=title, height=460, margin={"t": 50, "b": 40}, showlegend=False)
    return fig


def audio_high_norm_frame(scan: AudioScan, thresholds: np.ndarray) -> pd.DataFrame:
    """One row per hidden state over the clips' own frames: median and largest frame norm, the
    threshold, the share of frames above it, and the mean norm of first and other frames."""
    shares = scan.high_norm_share(thresholds)
    first = scan.norms[:, :, 0]  # every clip has a first frame
    rows = []
    for s, name in enumerate(scan.massive.state_names):
        own = scan.norms[s][~np.isnan(scan.norms[s])]
        others = scan.norms[s, :, 1:]
        rows.append(
            {
                "hidden state": name,
                "median frame norm": round(float(np.median(own)), 3),
                "largest frame norm": round(float(own.max()), 3),
                "threshold": round(float(thresholds[s]), 3),
                "high-norm frames": round(float(shares[s]), 4),
                "mean norm: first frame": round(float(np.nanmean(first[s])), 3),
                "mean norm: other frames": round(float(np.nanmean(others)), 3)
                if np.isfinite(others).any()
                else None,
            }
        )
    return pd.DataFrame(rows)
