"""Figures and tables of the Sentence similarity page (STS Spearman and word-sense accuracy by state)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from isoscope.analysis.similarity import ThresholdSweep

SERIES = {
    "raw": ("raw", "#1f77b4", "solid"),
    "clipped": ("clipped", "#d62728", "solid"),
    "processed": ("post-processed", "#2ca02c", "solid"),
}


def _values(rows: Sequence[dict], field: str) -> list[float | None]:
    return [
        None if r.get(field) is None or not np.isfinite(r[field]) else float(r[field]) for r in rows
    ]


def sts_figure(
    rows: Sequence[dict],
    processed_label: str | None = None,
    title: str = "STS: Spearman × 100 by hidden state",
) -> go.Figure:
    """Lines of Spearman x 100 per hidden state: raw, clipped and (if present) post-processed."""
    names = [r["name"] for r in rows]
    fig = go.Figure()
    for field, (label, colour, dash) in SERIES.items():
        if field not in rows[0]:
            continue
        if field == "processed" and processed_label:
            label = processed_label
        fig.add_trace(
            go.Scatter(
                x=names,
                y=_values(rows, field),
                mode="lines+markers",
                name=label,
                line=dict(color=colour, dash=dash),
            )
        )
    fig.update_layout(
        title=title,
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="Spearman × 100",
        height=380,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", y=-0.2),
        hovermode="x unified",
    )
    return fig


def word_sense_figure(rows: Sequence[dict], processed_label: str | None = None) -> go.Figure:
    """Best-threshold accuracy (solid) and leave-one-out accuracy (dotted) per hidden state."""
    names = [r["name"] for r in rows]
    fig = go.Figure()
    for field, (label, colour, _) in SERIES.items():
        if f"{field}_accuracy" not in rows[0]:
            continue
        if field == "processed" and processed_label:
            label = processed_label
        fig.add_trace(
            go.Scatter(
                x=names,
                y=_values(rows, f"{field}_accuracy"),
                mode="lines+markers",
                name=f"{label} (best threshold)",
                line=dict(color=colour),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=names,
                y=_values(rows, f"{field}_loo_accuracy"),
                mode="lines+markers",
                name=f"{label} (leave-one-out)",
                line=dict(color=colour, dash="dot"),
                marker=dict(symbol="circle-open"),
            )
        )
    fig.add_hline(
        y=0.5,
        line=dict(color="grey", dash="dash"),
        annotation_text="chance (balanced)",
        annotation_position="bottom right",
    )
    fig.update_layout(
        title="Word senses: accuracy by hidden state",
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="accuracy",
        yaxis_range=[0.0, 1.02],
        height=380,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", y=-0.2),
        hovermode="x unified",
    )
    return fig


def sweep_figure(sweeps: dict[str, ThresholdSweep], state_name: str) -> go.Figure:
    """Accuracy against the cosine threshold at one hidden state, one line per variant."""
    fig = go.Figure()
    for field, sweep in sweeps.items():
        label, colour, _ = SERIES.get(field, (field, None, None))
        fig.add_trace(
            go.Scatter(
                x=sweep.thresholds,
                y=sweep.accuracy,
                mode="lines",
                name=label,
                line=dict(color=colour, shape="hv"),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[sweep.best_threshold],
                y=[sweep.best_accuracy],
                mode="markers",
                showlegend=False,
                marker=dict(color=colour, size=10, symbol="star"),
                hovertemplate=f"{label}: best t = %{{x:.3f}}, accuracy %{{y:.3f}}<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"Threshold sweep at state {state_name} (same sense iff cosine > t)",
        xaxis_title="cosine threshold t",
        yaxis_title="accuracy",
        yaxis_range=[0.0, 1.02],
        height=320,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def sts_frame(rows: Sequence[dict]) -> pd.DataFrame:
    """The downloadable STS table: one row per hidden state."""
    frame = pd.DataFrame(rows)
    frame["clipped_dims"] = frame["clipped_dims"].map(lambda dims: " ".join(map(str, dims)))
    return frame.rename(columns={"name": "state"})


def word_sense_frame(rows: Sequence[dict]) -> pd.DataFrame:
    """The downloadable word-sense table: one row per hidden state."""
    return sts_frame(rows)
