"""Figures and tables of the Compare page: the CKA heatmap (Kornblith et al. 2019), per-state
metrics of A vs B, outlier dims gained and lost, the |mean| difference heatmap, LayerNorm
gamma/beta differences, and the checkpoint trajectory views.

Builders take :class:`isoscope.analysis.compare.comparison.Comparison` /
:class:`isoscope.analysis.compare.trajectory.Trajectory` (or plain arrays) and return
``plotly.graph_objects.Figure``; ``*_frame`` helpers give the data behind each chart for CSV
downloads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from isoscope.analysis.compare.comparison import Comparison, LNDifference
from isoscope.analysis.compare.trajectory import Trajectory

SIDE_COLOURS = {"A": "#1f77b4", "B": "#ff7f0e"}
CHANGE_COLOURS = {"kept": "#7f7f7f", "gained": "#2ca02c", "lost": "#d62728"}
STATE_METRICS = {
    "anisotropy": "Anisotropy (mean cosine of random pairs)",
    "isoscore": "IsoScore",
    "top_share": "Share of the mean cosine carried by the top dims",
    "sts": "STS Spearman x 100 (mean-pooled, raw)",
}
TRAJECTORY_METRICS = {
    "max_abs_mean": "Largest |mean| over dims",
    "anisotropy": "Anisotropy (mean cosine of random pairs)",
    "isoscore": "IsoScore",
    "outliers": "Number of outlier dims",
}
_MARGIN = dict(l=60, r=20, t=60, b=50)


# ----------------------------------------------------------------------------- CKA


def cka_heatmap(
    matrix: np.ndarray,
    names_a: Sequence[str],
    names_b: Sequence[str],
    label_a: str = "A",
    label_b: str = "B",
    title: str = "Linear CKA",
) -> go.Figure:
    """States of A (rows, y) x states of B (columns, x), 0..1 colour scale, each cell labelled;
    the diagonal (same index on both sides) is outlined."""
    m = np.asarray(matrix, dtype=np.float64)
    text = [[("" if np.isnan(v) else f"{v:.2f}") for v in row] for row in m]
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=[str(n) for n in names_b],
            y=[str(n) for n in names_a],
            zmin=0.0,
            zmax=1.0,
            colorscale="Viridis",
            text=text,
            texttemplate="%{text}",
            hovertemplate=f"{label_a} state %{{y}}<br>{label_b} state %{{x}}<br>CKA %{{z:.3f}}<extra></extra>",
            colorbar=dict(title="CKA"),
        )
    )
    for i in range(min(m.shape)):
        fig.add_shape(
            type="rect",
            x0=i - 0.5,
            x1=i + 0.5,
            y0=i - 0.5,
            y1=i + 0.5,
            line=dict(color="#ff2d55", width=3),
            fillcolor="rgba(0,0,0,0)",
        )
    fig.update_layout(
        title=title,
        xaxis=dict(title=f"{label_b}: hidden state", type="category"),
        yaxis=dict(title=f"{label_a}: hidden state", type="category", autorange="reversed"),
        margin=_MARGIN,
        height=max(320, 40 * m.shape[0] + 160),
    )
    return fig


def cka_frame(matrix: np.ndarray, names_a: Sequence[str], names_b: Sequence[str]) -> pd.DataFrame:
    rows = [
        {"state_a": a, "state_b": b, "cka": float(matrix[i, j])}
        for i, a in enumerate(names_a)
        for j, b in enumerate(names_b)
    ]
    return pd.DataFrame(rows, columns=["state_a", "state_b", "cka"])


# ----------------------------------------------------------------------------- per-state metrics


def _series(c: Comparison, metric: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    if metric == "sts":
        return c.sts_a, c.sts_b
    return getattr(c.a, metric), getattr(c.b, metric)


def state_metric_figure(
    c: Comparison, metric: str, label_a: str = "A", label_b: str = "B"
) -> go.Figure:
    """A and B overlaid over their hidden states (each over its own depth)."""
    fig = go.Figure()
    va, vb = _series(c, metric)
    for side, label, names, values in (
        ("A", label_a, c.a.state_names, va),
        ("B", label_b, c.b.state_names, vb),
    ):
        if values is None:
            continue
        fig.add_trace(
            go.Scatter(
                x=list(names),
                y=np.asarray(values, dtype=np.float64),
                mode="lines+markers",
                name=label,
                line=dict(color=SIDE_COLOURS[side]),
            )
        )
    title = STATE_METRICS[metric]
    if metric == "top_share":
        title += f" (top {c.a.top_k})"
    fig.update_layout(
        title=title,
        xaxis=dict(title="hidden state", type="category"),
        yaxis_title=STATE_METRICS[metric].split(" (")[0],
        margin=_MARGIN,
        height=340,
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def states_frame(c: Comparison) -> pd.DataFrame:
    """One row per hidden state both sides have (the ``states`` of the JSON, lists as text)."""
    rows = []
    for row in c.states:
        flat = {}
        for key, value in row.items():
            flat[key] = ", ".join(map(str, value)) if isinstance(value, list) else value
        if c.sts_a is not None and c.sts_b is not None:
            flat["sts_a"] = float(c.sts_a[row["index"]])
            flat["sts_b"] = float(c.sts_b[row["index"]])
        rows.append(flat)
    return pd.DataFrame(rows)


def outlier_change_figure(c: Comparison, label_a: str = "A", label_b: str = "B") -> go.Figure:
    """Outlier dims per hidden state: in both (grey), gained by B (green), lost by B (red)."""
    points: dict[str, tuple[list[str], list[int]]] = {k: ([], []) for k in CHANGE_COLOURS}
    for row in c.states:
        oa, ob = set(row["outliers_a"]), set(row["outliers_b"])
        for kind, dims in (("kept", oa & ob), ("gained", ob - oa), ("lost", oa - ob)):
            for d in sorted(dims):
                points[kind][0].append(row["name"])
                points[kind][1].append(d)
    names = {
        "kept": "outlier in both",
        "gained": f"gained (only {label_b})",
        "lost": f"lost (only {label_a})",
    }
    symbols = {"kept": "circle", "gained": "triangle-up", "lost": "x"}
    fig = go.Figure()
    for kind, (xs, ys) in points.items():
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=names[kind],
                marker=dict(color=CHANGE_COLOURS[kind], size=11, symbol=symbols[kind]),
                hovertemplate="state %{x}<br>dim %{y}<extra>" + names[kind] + "</extra>",
            )
        )
    fig.update_layout(
        title="Outlier dimensions per hidden state: kept, gained, lost",
        xaxis=dict(
            title="hidden state",
            type="category",
            categoryorder="array",
            categoryarray=[r["name"] for r in c.states],
        ),
        yaxis_title="dimension",
        margin=_MARGIN,
        height=360,
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def abs_mean_diff_heatmap(
    diff: np.ndarray, names: Sequence[str], label_a: str = "A", label_b: str = "B"
) -> go.Figure:
    """States x dims heatmap of |mean_B| - |mean_A|, diverging colours centred on 0."""
    z = np.asarray(diff, dtype=np.float32)  # float32 travels as half the bytes
    bound = float(np.nanmax(np.abs(z))) if z.size else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=np.arange(z.shape[1]),
            y=[str(n) for n in names[: z.shape[0]]],
            colorscale="RdBu_r",
            zmid=0.0,
            zmin=-bound or -1.0,
            zmax=bound or 1.0,
            colorbar=dict(title="Δ|mean|"),
            hovertemplate="state %{y}<br>dim %{x}<br>|mean| B - A: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"|mean| of {label_b} minus |mean| of {label_a}, per hidden state and dim",
        xaxis_title="dimension",
        yaxis=dict(title="hidden state", type="category", autorange="reversed"),
        margin=_MARGIN,
        height=max(280, 30 * z.shape[0] + 140),
    )
    return fig


def abs_mean_diff_frame(diff: np.ndarray, names: Sequence[str]) -> pd.DataFrame:
    s, d = diff.shape
    return pd.DataFrame(
        {
            "state": np.repeat([str(n) for n in names[:s]], d),
            "dim": np.tile(np.arange(d), s),
            "abs_mean_b_minus_a": diff.ravel(),
        }
    )


def ln_diff_heatmap(ln: LNDifference, which: str = "gamma") -> go.Figure:
    """LayerNorms x dims heatmap of gamma_B - gamma_A (or beta), diverging colours centred on 0."""
    z = (ln.d_gamma if which == "gamma" else ln.d_beta).astype(np.float32)
    bound = float(np.abs(z).max()) if z.size else 1.0
    symbol = "γ" if which == "gamma" else "β"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=np.arange(z.shape[1]),
            y=list(ln.names),
            colorscale="RdBu_r",
            zmid=0.0,
            zmin=-bound or -1.0,
            zmax=bound or 1.0,
            colorbar=dict(title=f"Δ{symbol}"),
            hovertemplate="%{y}<br>dim %{x}<br>" + f"Δ{symbol}" + " %{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"LayerNorm {symbol}: B minus A, per norm and dim",
        xaxis_title="dimension",
        yaxis=dict(title="LayerNorm", type="category", autorange="reversed"),
        margin=_MARGIN,
        height=max(300, 22 * len(ln.names) + 140),
    )
    return fig


# ----------------------------------------------------------------------------- trajectory


def _outlier_counts(t: Trajectory) -> np.ndarray:
    return np.array([[len(r["outlier_dims"]) for r in p.states] for p in t.points], dtype=float)


def trajectory_figure(t: Trajectory, metric: str) -> go.Figure:
    """One line per hidden state over the training steps."""
    values = _outlier_counts(t) if metric == "outliers" else t.series(metric)
    fig = go.Figure()
    for s, name in enumerate(t.state_names()):
        fig.add_trace(
            go.Scatter(
                x=t.steps,
                y=values[:, s],
                mode="lines+markers",
                name=f"state {name}",
                hovertemplate=f"state {name}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"{TRAJECTORY_METRICS[metric]} by training step",
        xaxis_title="step",
        yaxis_title=TRAJECTORY_METRICS[metric],
        margin=_MARGIN,
        height=360,
    )
    return fig


def emergence_figure(t: Trajectory) -> go.Figure:
    """Every (state, dim) that is an outlier at some checkpoint, at the step it first became one;
    marker size = at how many checkpoints it is one."""
    rows = t.emergence()
    fig = go.Figure()
    for name in t.state_names():
        mine = [r for r in rows if r["state"] == name]
        if not mine:
            continue
        fig.add_trace(
            go.Scatter(
                x=[r["first_step"] for r in mine],
                y=[r["dim"] for r in mine],
                mode="markers",
                name=f"state {name}",
                marker=dict(size=[6 + 3 * r["checkpoints"] for r in mine], opacity=0.75),
                customdata=[[r["last_step"], r["checkpoints"]] for r in mine],
                hovertemplate=f"state {name}<br>dim %{{y}}<br>first at step %{{x}}"
                "<br>last at step %{customdata[0]}<br>at %{customdata[1]} checkpoints<extra></extra>",
            )
        )
    fig.update_layout(
        title="When each outlier dim first appears (size: number of checkpoints it is an outlier)",
        xaxis_title="first step as an outlier",
        yaxis_title="dimension",
        margin=_MARGIN,
        height=380,
    )
    return fig


def ln_gamma_flag_heatmap(t: Trajectory) -> go.Figure:
    """LayerNorms x steps: how many dims of each norm have an outlier gamma (|γ - mean| > 3 std)."""
    names = list(t.points[0].ln_gamma_flags) if t.points else []
    z = np.array([[len(p.ln_gamma_flags.get(n, [])) for p in t.points] for n in names], dtype=float)
    text = [[", ".join(map(str, p.ln_gamma_flags.get(n, [])[:6])) for p in t.points] for n in names]
    fig = go.Figure(
        go.Heatmap(
            z=z if z.size else np.zeros((0, 0)),
            x=[str(s) for s in t.steps],
            y=names,
            colorscale="Blues",
            zmin=0,
            zmax=max(1.0, float(z.max())) if z.size else 1.0,
            text=text,
            hovertemplate="%{y}<br>step %{x}<br>%{z} outlier γ dims: %{text}<extra></extra>",
            colorbar=dict(title="dims"),
        )
    )
    fig.update_layout(
        title="LayerNorm γ outliers (|γ - mean| > 3 std) per norm over steps",
        xaxis=dict(title="step", type="category"),
        yaxis=dict(title="LayerNorm", type="category", autorange="reversed"),
        margin=_MARGIN,
        height=max(300, 22 * len(names) + 140),
    )
    return fig


def trajectory_frame(t: Trajectory) -> pd.DataFrame:
    """Long table: one row per (checkpoint, hidden state) with every per-state figure."""
    rows = []
    for p in t.points:
        for r in p.states:
            rows.append(
                {
                    "step": p.step,
                    "checkpoint": p.path,
                    "state": r["name"],
                    "max_abs_mean": r["max_abs_mean"],
                    "max_abs_mean_dim": r["max_abs_mean_dim"],
                    "outlier_dims": ", ".join(map(str, r["outlier_dims"])),
                    "anisotropy": r["anisotropy"],
                    "isoscore": r["isoscore"],
                    "ln_outlier_dims": ", ".join(map(str, p.ln_outlier_dims)),
                }
            )
    return pd.DataFrame(rows)
