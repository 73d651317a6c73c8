"""Figures and tables of the LayerNorm page (BERT Busters: outlier LN parameters and ablations)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from isoscope.analysis.layernorm.params import LNOutliers, LNParams
from isoscope.plots.lines import add_vlines

ABLATION_COLOR = "#d62728"
CONTROL_COLOR = "#7f7f7f"
METRIC_LABELS = {
    "embedding_cosine": "cosine(original, ablated) of mean-pooled sentence embeddings",
    "token_cosine": "cosine(original, ablated) of token vectors",
    "anisotropy_change": "change in anisotropy (ablated - original)",
    "sts_change": "change in STS Spearman x 100 (ablated - original)",
}


def _row_zscores(values: np.ndarray) -> np.ndarray:
    """Per row (norm): (x - mean) / std; 0 for a row without spread (fresh LayerNorm)."""
    mean = values.mean(axis=1, keepdims=True)
    std = values.std(axis=1, keepdims=True)
    safe = np.where(std > 1e-12 * np.maximum(1, np.abs(mean)), std, np.inf)
    return (values - mean) / safe


def param_heatmap(
    params: LNParams,
    flags: np.ndarray,
    which: str = "gamma",
    scale: str = "z-score",
    outlier_dims: Sequence[int] = (),
) -> go.Figure:
    """LayerNorms x dims heatmap of gamma or beta; flagged cells are circled, outlier dims ticked.

    ``scale``: "z-score" (per norm, what the detector thresholds) or "value" (the raw parameter).
    """
    values = params.gamma if which == "gamma" else params.beta
    if scale == "z-score":
        z = _row_zscores(values)
        zmax = float(min(max(np.abs(z).max(), 3.0), 12.0))
        colorbar = "z (per LN)"
        zmid = 0.0
    else:
        z = values
        zmid = 1.0 if which == "gamma" else 0.0
        zmax = float(np.quantile(np.abs(values - zmid), 0.999)) or 1.0
        colorbar = which
    d = values.shape[1]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(d)),
            y=params.names,
            colorscale="RdBu_r",
            zmid=zmid,
            zmin=zmid - zmax,
            zmax=zmid + zmax,
            colorbar=dict(title=colorbar),
            customdata=values,
            hovertemplate="%{y} · dim %{x}<br>"
            + which
            + " = %{customdata:.4g}<br>"
            + colorbar
            + " = %{z:.2f}<extra></extra>",
        )
    )
    rows, cols = np.nonzero(flags)
    if len(rows):
        fig.add_trace(
            go.Scatter(
                x=cols,
                y=[params.names[r] for r in rows],
                mode="markers",
                name="flagged (|z| > k)",
                marker=dict(symbol="circle-open", size=9, color="black", line=dict(width=1.5)),
                hovertemplate="%{y} · dim %{x} flagged<extra></extra>",
            )
        )
    add_vlines(fig, outlier_dims, dict(color=ABLATION_COLOR, width=1, dash="dot"))
    fig.update_layout(
        title=f"LayerNorm {which} ({'γ' if which == 'gamma' else 'β'}) by norm and dimension"
        + (f" · outlier dims {', '.join(map(str, outlier_dims))}" if len(outlier_dims) else ""),
        xaxis_title="dimension",
        yaxis=dict(autorange="reversed", title=None),
        height=max(300, 40 + 22 * len(params.names)),
        margin=dict(l=90, r=20, t=50, b=40),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def flag_counts_bar(outliers: LNOutliers) -> go.Figure:
    """How many dims each norm flags, for gamma and beta."""
    fig = go.Figure(
        [
            go.Bar(x=outliers.names, y=outliers.weight_flags.sum(axis=1), name="γ (gamma)"),
            go.Bar(x=outliers.names, y=outliers.bias_flags.sum(axis=1), name="β (beta)"),
        ]
    )
    fig.update_layout(
        barmode="group",
        title=f"Flagged dimensions per LayerNorm (|x - mean| > {outliers.k:g} std)",
        yaxis_title="flagged dims",
        height=300,
        margin=dict(l=40, r=20, t=50, b=40),
    )
    return fig


def overlap_table(
    ln_dims: Sequence[int], state_names: Sequence[str], hidden_outliers: Sequence[Sequence[int]]
) -> pd.DataFrame:
    """Per hidden state: its outlier dims, and which of them are LayerNorm outlier dims."""
    ln = set(ln_dims)
    rows = []
    for name, dims in zip(state_names, hidden_outliers, strict=True):
        both = [j for j in dims if j in ln]
        rows.append(
            {
                "hidden state": name,
                "hidden-state outlier dims": ", ".join(map(str, dims)) or "—",
                "also LN outliers": ", ".join(map(str, both)) or "—",
                "LN outliers not outlying here": ", ".join(str(j) for j in sorted(ln - set(dims)))
                or "—",
            }
        )
    return pd.DataFrame(rows)


def overlap_figure(
    ln_dims: Sequence[int],
    state_names: Sequence[str],
    hidden_outliers: Sequence[Sequence[int]],
    hidden_size: int,
) -> go.Figure:
    """Hidden-state outlier dims (dots, per state) against the LayerNorm outlier dims (lines)."""
    ln = set(ln_dims)
    xs, ys, colors = [], [], []
    for name, dims in zip(state_names, hidden_outliers, strict=True):
        for j in dims:
            xs.append(j)
            ys.append(name)
            colors.append(ABLATION_COLOR if j in ln else "#1f77b4")
    fig = go.Figure(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            marker=dict(size=11, color=colors, symbol="square"),
            name="hidden-state outlier (red: also a LayerNorm outlier)",
            hovertemplate="state %{y} · dim %{x}<extra></extra>",
        )
    )
    # every hidden state gets a row, also those without outliers (invisible anchor points)
    fig.add_trace(
        go.Scatter(
            x=[-10] * len(state_names),
            y=list(state_names),
            mode="markers",
            marker=dict(opacity=0),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    dims = sorted(ln)
    add_vlines(fig, dims, dict(color=ABLATION_COLOR, width=1, dash="dot"), labels=map(str, dims))
    fig.update_layout(
        title="Hidden-state outlier dims (z-score or extreme-index) vs LayerNorm outlier dims (dotted)",
        xaxis=dict(title="dimension", range=[-1, hidden_size]),
        yaxis=dict(
            title="hidden state",
            type="category",
            categoryorder="array",
            categoryarray=list(state_names),
        ),
        height=320,
        margin=dict(l=50, r=20, t=60, b=40),
        showlegend=False,
    )
    return fig


def _metric_values(report, key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(ablation (S,), controls (n, S)) for a metric key of :data:`METRIC_LABELS`."""
    if key in ("embedding_cosine", "token_cosine"):
        return getattr(report.effect, key), report.control_values(key).reshape(
            len(report.controls), -1
        )
    if key == "anisotropy_change":
        base = report.anisotropy_original
        return report.effect.anisotropy - base, report.control_values("anisotropy").reshape(
            len(report.controls), -1
        ) - base
    if key == "sts_change":
        if report.sts_spearman_original is None:
            return None
        base = report.sts_spearman_original
        return report.effect.sts_spearman - base, report.control_values("sts_spearman").reshape(
            len(report.controls), -1
        ) - base
    raise ValueError(f"unknown metric {key!r}")


def available_metrics(report) -> list[str]:
    return [k for k in METRIC_LABELS if _metric_values(report, k) is not None]


def ablation_vs_controls(report, key: str = "embedding_cosine") -> go.Figure:
    """Per hidden state: the random controls as a box with every control as a dot, and the
    ablation of the chosen dims as a red diamond."""
    values = _metric_values(report, key)
    if values is None:
        raise ValueError(f"{key} is not available for this ablation")
    ablation, controls = values
    names = list(report.state_names)
    fig = go.Figure()
    if controls.size:
        fig.add_trace(
            go.Box(
                x=np.repeat(names, controls.shape[0]).tolist(),
                y=controls.T.ravel(),
                name=f"random controls ({controls.shape[0]})",
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker=dict(color=CONTROL_COLOR, size=6),
                line=dict(color=CONTROL_COLOR),
                fillcolor="rgba(127,127,127,0.15)",
                hovertemplate="state %{x}<br>control: %{y:.4f}<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=ablation,
            mode="markers+lines",
            name=f"ablated dims {', '.join(map(str, report.dims))}",
            marker=dict(symbol="diamond", size=12, color=ABLATION_COLOR),
            line=dict(color=ABLATION_COLOR, width=1, dash="dot"),
            hovertemplate="state %{x}<br>ablation: %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=METRIC_LABELS[key],
        yaxis_title=key.replace("_", " "),
        xaxis=dict(
            title="hidden state", type="category", categoryorder="array", categoryarray=names
        ),
        height=380,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def mlm_loss_figure(report) -> go.Figure:
    """Masked-token loss: original, the ablation, each random control."""
    labels = ["original", "ablation"] + [f"control {i + 1}" for i in range(len(report.controls))]
    values = [report.mlm_loss_original, report.effect.mlm_loss] + [
        e.mlm_loss for _, e in report.controls
    ]
    colors = ["#1f77b4", ABLATION_COLOR] + [CONTROL_COLOR] * len(report.controls)
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=values,
            marker_color=colors,
            text=[f"{v:.3f}" for v in values],
            textposition="outside",
        )
    )
    fig.update_layout(
        title=f"Masked-token loss (15 % masking, {report.num_masked:,} masked tokens, seed {report.seed})",
        yaxis_title="cross-entropy (nats)",
        height=340,
        margin=dict(l=50, r=20, t=50, b=40),
    )
    return fig


def sweep_bar(
    result, state: int = -1, metric: str = "embedding_drift", highlight: Sequence[int] = ()
) -> go.Figure:
    """One bar per dimension: the damage of ablating that dim alone (LN outlier dims in red)."""
    if metric == "embedding_drift":
        y = 1 - result.embedding_cosine[:, state]
        title = "sentence-embedding drift 1 - cosine"
    elif metric == "token_drift":
        y = 1 - result.token_cosine[:, state]
        title = "token-vector drift 1 - cosine"
    elif metric == "mlm_loss_increase" and result.mlm_loss is not None:
        y = result.mlm_loss - result.mlm_loss_original
        title = "MLM loss increase (nats)"
    else:
        raise ValueError(f"unknown or unavailable sweep metric {metric!r}")
    hi = set(highlight)
    colors = [ABLATION_COLOR if int(j) in hi else "#1f77b4" for j in result.dims]
    state_name = result.state_names[state] if metric != "mlm_loss_increase" else "MLM head"
    fig = go.Figure(
        go.Bar(
            x=result.dims,
            y=y,
            marker_color=colors,
            hovertemplate="dim %{x}<br>%{y:.5f}<extra></extra>",
        )
    )
    top = np.argsort(-np.nan_to_num(y))[:5]
    for i in top:
        fig.add_annotation(
            x=int(result.dims[i]),
            y=float(y[i]),
            text=str(int(result.dims[i])),
            showarrow=False,
            yshift=10,
        )
    fig.update_layout(
        title=f"One dimension at a time: {title} at {state_name} ({result.num_texts} texts"
        + ("" if result.complete else ", stopped early")
        + ")",
        xaxis_title="ablated dimension (red: LayerNorm outlier)",
        yaxis_title=title,
        height=360,
        margin=dict(l=50, r=20, t=50, b=40),
        bargap=0.05,
    )
    return fig
