"""Figures and tables of the Outlier dimensions page (docs/methods.md section 1).

Builders take plain arrays (or an :class:`~isoscope.engine.extraction.ExtractionResult`) and return Plotly
figures or pandas frames; nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from isoscope.analysis.outliers import (
    CRITERIA,
    CRITERION_LABELS,
    OutlierThresholds,
    criteria_by_state,
    outlier_dims_by_state,
)
from isoscope.engine.jsonio import strict_json

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from isoscope.engine.extraction import ExtractionResult

# Heatmap colour options: label -> (how to read it, diverging colour scale?)
HEATMAP_STATS: dict[str, str] = {
    "mean": "mean value of each dimension over all tokens",
    "|mean|": "magnitude of the mean",
    "variance": "variance over all tokens",
    "argmin share": "share of tokens whose smallest value sits in this dimension (Luo et al.)",
    "argmax share": "share of tokens whose largest value sits in this dimension (Luo et al.)",
}
CATEGORY_ORDER = ("position 0", "special", "punctuation", "other")
CRITERION_SHORT = {
    "extreme_index": "extreme index",
    "zscore": "z-score",
    "quantile": "quantile",
    "variance": "variance",
}
# One marker per criterion, offset vertically so that several can mark the same cell.
_MARKERS = {
    "zscore": ("circle-open", "#111111", 0.0),
    "extreme_index": ("x-thin-open", "#d62728", 0.0),
    "quantile": ("diamond-open", "#2ca02c", 0.28),
    "variance": ("square-open", "#9467bd", -0.28),
}


def heatmap_values(result: ExtractionResult, stat: str) -> np.ndarray:
    """The (num_states, hidden_size) matrix behind the layers x dimensions heatmap."""
    if stat == "mean":
        return result.mean
    if stat == "|mean|":
        return np.abs(result.mean)
    if stat == "variance":
        return result.variance
    if stat == "argmin share":
        return result.argmin_freq
    if stat == "argmax share":
        return result.argmax_freq
    raise ValueError(f"unknown statistic {stat!r}; choose one of {', '.join(HEATMAP_STATS)}")


def layer_dim_heatmap(
    values: np.ndarray,
    state_names: Sequence[str],
    stat: str,
    marks: Mapping[str, Sequence[Sequence[int]]] | None = None,
    visible_marks: Sequence[str] = ("zscore", "extreme_index"),
) -> go.Figure:
    """Hidden states (rows, ``emb`` at the bottom) x dimensions heatmap of ``values`` (S, d).

    ``marks[criterion][s]`` lists the outlier dims of hidden state ``s``; each criterion is a
    marker trace (those not in ``visible_marks`` start hidden, toggled from the legend).
    """
    values = np.asarray(values, dtype=np.float64)
    num_states, d = values.shape
    diverging = stat == "mean"
    heat = go.Heatmap(
        z=values,
        x=np.arange(d),
        y=np.arange(num_states),
        colorscale="RdBu_r" if diverging else "Viridis",
        zmid=0.0 if diverging else None,
        colorbar=dict(title=stat, thickness=14),
        customdata=np.broadcast_to(np.array(state_names, dtype=object)[:, None], values.shape),
        hovertemplate="hidden state %{customdata}<br>dim %{x}<br>"
        + stat
        + " %{z:.4g}<extra></extra>",
    )
    fig = go.Figure(heat)
    for criterion in CRITERIA:
        per_state = (marks or {}).get(criterion)
        if per_state is None:
            continue
        symbol, colour, offset = _MARKERS[criterion]
        xs = [int(j) for dims in per_state for j in dims]
        ys = [s + offset for s, dims in enumerate(per_state) for _ in dims]
        names = [state_names[s] for s, dims in enumerate(per_state) for _ in dims]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=CRITERION_SHORT[criterion],
                marker=dict(symbol=symbol, size=11, color=colour, line=dict(width=2, color=colour)),
                customdata=names,
                visible=True if criterion in visible_marks else "legendonly",
                hovertemplate=(
                    f"{CRITERION_SHORT[criterion]} outlier<br>hidden "
                    f"state %{{customdata}}<br>dim %{{x}}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        title=f"{stat} per hidden state and dimension (markers: outlier dims)",
        xaxis=dict(title="dimension", showgrid=False, zeroline=False, range=[-0.5, d - 0.5]),
        yaxis=dict(
            title="hidden state",
            tickmode="array",
            tickvals=list(range(num_states)),
            ticktext=list(state_names),
            showgrid=False,
            zeroline=False,
            range=[-0.5, num_states - 0.5],
        ),
        legend=dict(
            orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1, title="outliers:"
        ),
        height=max(380, 110 + 44 * num_states),
        margin=dict(l=60, r=20, t=80, b=40),
    )
    return fig


def outlier_heatmap(
    result: ExtractionResult, stat: str = "mean", thresholds: OutlierThresholds | None = None
) -> go.Figure:
    """The Outlier dimensions page's figure: hidden states x dims heatmap of ``stat`` (one of
    :data:`HEATMAP_STATS`) with every criterion's outlier dims marked."""
    marks = criteria_marks(criteria_by_state(result, thresholds))
    return layer_dim_heatmap(heatmap_values(result, stat), result.state_names, stat, marks=marks)


def criteria_marks(by_state: Sequence[Mapping[str, Sequence[int]]]) -> dict[str, list[list[int]]]:
    """Reshape :func:`~isoscope.analysis.outliers.criteria_by_state` to ``{criterion: [dims per state]}``."""
    return {c: [list(found[c]) for found in by_state] for c in CRITERIA}


def state_outlier_frame(
    result: ExtractionResult, state: int, found: Mapping[str, Sequence[int]]
) -> pd.DataFrame:
    """One row per dim flagged by any criterion at ``state``: its statistics and a tick per
    criterion, sorted by |z| of the mean (strongest first). Returns a pandas DataFrame."""
    mean = result.mean[state]
    variance = result.variance[state]
    spread = mean.std()
    z = (mean - mean.mean()) / spread if spread > 0 else np.zeros_like(mean)
    var_ratio = variance / variance.mean() if variance.mean() > 0 else np.zeros_like(variance)
    dims = sorted(set().union(*map(set, found.values())), key=lambda j: -abs(z[j]))
    sample = np.abs(result.sample_vectors[state][:, dims]) if dims else np.zeros((0, 0))
    median_abs = np.median(sample, axis=0) if len(dims) else np.zeros(0)
    rows = []
    for i, j in enumerate(dims):
        rows.append(
            {
                "dim": int(j),
                "mean": float(mean[j]),
                "z-score of mean": float(z[j]),
                "variance": float(variance[j]),
                "variance / average": float(var_ratio[j]),
                "argmin share": float(result.argmin_freq[state, j]),
                "argmax share": float(result.argmax_freq[state, j]),
                "median |value| (sample)": float(median_abs[i]),
                **{f"by {CRITERION_SHORT[c]}": j in found[c] for c in CRITERIA},
            }
        )
    columns = [
        "dim",
        "mean",
        "z-score of mean",
        "variance",
        "variance / average",
        "argmin share",
        "argmax share",
        "median |value| (sample)",
        *(f"by {CRITERION_SHORT[c]}" for c in CRITERIA),
    ]
    return pd.DataFrame(rows, columns=columns)


def outliers_payload(
    result: ExtractionResult,
    by_state: Sequence[Mapping[str, Sequence[int]]],
    thresholds: OutlierThresholds,
) -> dict:
    """The outlier dims of every hidden state under ``thresholds`` (the page's JSON download)."""
    return {
        "model": result.model.get("source"),
        "corpus": result.corpus_name,
        "num_tokens": result.num_tokens,
        "thresholds": {
            "extreme_index_share": thresholds.extreme_share,
            "zscore_k": thresholds.zscore_k,
            "quantile": thresholds.quantile,
            "variance_factor": thresholds.variance_factor,
        },
        "criteria": {c: CRITERION_LABELS[c] for c in CRITERIA},
        "hidden_states": [
            {"index": s, "name": name, **{c: [int(j) for j in by_state[s][c]] for c in CRITERIA}}
            for s, name in enumerate(result.state_names)
        ],
    }


def outliers_json(
    result: ExtractionResult,
    by_state: Sequence[Mapping[str, Sequence[int]]],
    thresholds: OutlierThresholds,
) -> str:
    """:func:`outliers_payload` as strict JSON."""
    return strict_json(outliers_payload(result, by_state, thresholds), indent=1)


def token_dim_heatmap(
    hidden: np.ndarray,
    tokens: Sequence[str],
    state_name: str,
    outlier_dims: Sequence[int] = (),
) -> go.Figure:
    """Tokens (rows, first token on top) x dimensions of one text at one hidden state, with the
    state's outlier dims marked by triangles above the first row. ``hidden``: (T, d).

    Hover shows the token's position, dimension and value; the token itself is the row label."""
    hidden = np.asarray(hidden, dtype=np.float64)
    num_tokens, d = hidden.shape
    labels = [f"{i}: {tok}" for i, tok in enumerate(tokens)]
    fig = go.Figure(
        go.Heatmap(
            z=hidden,
            x=np.arange(d),
            y=np.arange(num_tokens),
            colorscale="RdBu_r",
            zmid=0.0,
            colorbar=dict(title="value", thickness=14),
            # the token is the row's axis label; a per-cell label string would multiply the
            # payload by the hidden size (T x d strings), so the hover names the position only
            hovertemplate="token %{y}<br>dim %{x}<br>value %{z:.4g}<extra></extra>",
        )
    )
    if len(outlier_dims):
        fig.add_trace(
            go.Scatter(
                x=[int(j) for j in outlier_dims],
                y=[-1.0] * len(outlier_dims),
                mode="markers+text",
                text=[str(int(j)) for j in outlier_dims],
                textposition="top center",
                marker=dict(symbol="triangle-down", size=11, color="#111111"),
                name="outlier dims",
                hovertemplate="outlier dim %{x}<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"Hidden state {state_name}: every token's vector (markers: outlier dims of this state)",
        xaxis=dict(title="dimension", showgrid=False, zeroline=False, range=[-0.5, d - 0.5]),
        yaxis=dict(
            tickmode="array",
            tickvals=list(range(num_tokens)),
            ticktext=labels,
            autorange=False,
            range=[num_tokens - 0.5, -2.2],
            showgrid=False,
            zeroline=False,
        ),
        showlegend=False,
        height=min(1600, max(320, 110 + 18 * num_tokens)),
        margin=dict(l=120, r=20, t=60, b=40),
    )
    return fig


def dimension_by_category(
    values: np.ndarray, categories: np.ndarray, dim: int, state_name: str
) -> go.Figure:
    """Box plot of one dimension's values split by token category (Timkey & van Schijndel 2021:
    rogue dimensions track position 0 and punctuation). Empty categories are left out."""
    values = np.asarray(values, dtype=np.float64)
    categories = np.asarray(categories)
    fig = go.Figure()
    for category in CATEGORY_ORDER:
        picked = values[categories == category]
        if len(picked) == 0:
            continue
        fig.add_trace(
            go.Box(y=picked, name=f"{category} (n={len(picked):,})", boxpoints="outliers")
        )
    fig.update_layout(
        title=f"Dimension {dim} at hidden state {state_name}, split by token type",
        yaxis_title=f"value of dim {dim}",
        showlegend=False,
        height=380,
        margin=dict(l=50, r=20, t=50, b=40),
    )
    return fig


def category_summary(values: np.ndarray, categories: np.ndarray) -> pd.DataFrame:
    """Count, mean and median of one dimension's values per token category (a pandas frame)."""
    values = np.asarray(values, dtype=np.float64)
    rows = []
    for category in CATEGORY_ORDER:
        picked = values[np.asarray(categories) == category]
        if len(picked):
            rows.append(
                {
                    "token type": category,
                    "tokens": len(picked),
                    "mean": float(picked.mean()),
                    "median": float(np.median(picked)),
                }
            )
    return pd.DataFrame(rows, columns=["token type", "tokens", "mean", "median"])


def outlier_frame_all(
    result: ExtractionResult, by_state: Sequence[Mapping[str, Sequence[int]]]
) -> pd.DataFrame:
    """:func:`state_outlier_frame` for every hidden state, stacked with a ``hidden state`` column."""
    frames = []
    for s, name in enumerate(result.state_names):
        frame = state_outlier_frame(result, s, by_state[s])
        frame.insert(0, "hidden state", name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def headline_outlier(
    result: ExtractionResult, by_state: Sequence[Mapping[str, Sequence[int]]]
) -> dict | None:
    """The dimension flagged (z-score or extreme-index) in the most hidden states, for the page's
    'what to notice' line: ``{"dim", "states", "mean", "typical"}`` or None when nothing is flagged."""
    counts: dict[int, list[int]] = {}
    for s, dims in enumerate(outlier_dims_by_state(result, criteria=by_state)):
        for j in sorted(dims):  # by index, so ties between dims resolve as they always have
            counts.setdefault(int(j), []).append(s)
    if not counts:
        return None
    dim = max(
        counts, key=lambda j: (len(counts[j]), max(abs(result.mean[s, j]) for s in counts[j]))
    )
    states = sorted(counts[dim])
    strongest = max(states, key=lambda s: abs(result.mean[s, dim]))
    return {
        "dim": dim,
        "states": [result.state_names[s] for s in states],
        "state": result.state_names[strongest],
        "mean": float(result.mean[strongest, dim]),
        "typical": float(np.median(np.abs(result.mean[strongest]))),
    }
