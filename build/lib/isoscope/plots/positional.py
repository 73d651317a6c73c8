"""Figures of the Positional information page (position table, probe, TUPE, variance lab, q/k)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from isoscope.analysis.positional.tupe import TERM_LABELS, TERMS
from isoscope.plots.axes import log_axis

_MARGIN = dict(l=50, r=20, t=50, b=45)
_LAYER_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def cosine_heatmap(
    cosine: np.ndarray, title: str = "Cosine similarity of position embeddings"
) -> go.Figure:
    """(N, N) cosine matrix of position vectors."""
    n = cosine.shape[0]
    fig = go.Figure(
        go.Heatmap(
            z=cosine,
            x=list(range(n)),
            y=list(range(n)),
            colorscale="RdBu",
            zmid=0,
            zmin=-1,
            zmax=1,
            colorbar=dict(title="cos"),
            hovertemplate="positions %{y} · %{x}<br>cos %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title="position",
        yaxis_title="position",
        yaxis_autorange="reversed",
        height=460,
        margin=_MARGIN,
    )
    return fig


def position_pca(coords: np.ndarray, explained: np.ndarray) -> go.Figure:
    """First two principal components of the position vectors, coloured by position."""
    n = coords.shape[0]
    fig = go.Figure(
        go.Scatter(
            x=coords[:, 0],
            y=coords[:, 1],
            mode="lines+markers",
            marker=dict(
                color=np.arange(n), colorscale="Viridis", size=6, colorbar=dict(title="position")
            ),
            line=dict(color="rgba(120,120,120,0.3)"),
            text=[f"position {i}" for i in range(n)],
            hovertemplate="%{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"PCA of position embeddings (PC1 {explained[0]:.0%}, PC2 {explained[1]:.0%} of variance)",
        xaxis_title="PC1",
        yaxis_title="PC2",
        height=460,
        margin=_MARGIN,
    )
    return fig


def extreme_share_bars(
    argmax_share: np.ndarray, argmin_share: np.ndarray, outliers: Sequence[int], top: int = 20
) -> go.Figure:
    """Top dims by share of position vectors whose max / min they hold; hidden-state outliers marked."""
    share = np.maximum(argmax_share, argmin_share)
    dims = np.argsort(-share, kind="stable")[:top]
    labels = [f"{j}{' ★' if j in set(outliers) else ''}" for j in dims]
    fig = go.Figure(
        [
            go.Bar(x=labels, y=argmax_share[dims], name="argmax share"),
            go.Bar(x=labels, y=argmin_share[dims], name="argmin share"),
        ]
    )
    fig.update_layout(
        title="Extreme dimensions of the position vectors (★ = hidden-state outlier)",
        barmode="group",
        xaxis_title="dimension",
        yaxis_title="share of positions",
        xaxis_type="category",
        height=360,
        margin=_MARGIN,
    )
    return fig


def layernorm_params(
    gamma: np.ndarray, beta: np.ndarray, name: str, highlight: Sequence[int]
) -> go.Figure:
    """gamma and beta of a LayerNorm per dimension; highlighted dims drawn as red markers."""
    d = len(gamma)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        subplot_titles=(f"{name} γ (gain)", f"{name} β (bias)"),
        vertical_spacing=0.12,
    )
    for row, values in ((1, gamma), (2, beta)):
        fig.add_trace(
            go.Scatter(
                x=np.arange(d),
                y=values,
                mode="markers",
                marker=dict(size=4, color="#1f77b4"),
                showlegend=False,
                hovertemplate="dim %{x}: %{y:.4f}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        hl = [j for j in highlight if 0 <= j < d]
        if hl:
            fig.add_trace(
                go.Scatter(
                    x=hl,
                    y=values[hl],
                    mode="markers+text",
                    text=[str(j) for j in hl],
                    textposition="top center",
                    marker=dict(size=9, color="#d62728"),
                    name="hidden-state outlier",
                    showlegend=row == 1,
                    hovertemplate="dim %{x}: %{y:.4f}<extra>outlier</extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_layout(
        height=470,
        margin=dict(_MARGIN, t=90),
        title="Embedding LayerNorm parameters (BERT Busters' suspect)",
    )
    fig.update_xaxes(title_text="dimension", row=2, col=1)
    return fig


def probe_accuracy_line(
    state_names: Sequence[str], accuracy: np.ndarray, train_accuracy: np.ndarray, chance: float
) -> go.Figure:
    """Held-out (and training) accuracy of the position probe per hidden state, with chance."""
    x = list(state_names)
    fig = go.Figure(
        [
            go.Scatter(x=x, y=accuracy, mode="lines+markers", name="held-out texts"),
            go.Scatter(
                x=x,
                y=train_accuracy,
                mode="lines+markers",
                name="training texts",
                line=dict(dash="dot"),
            ),
            go.Scatter(
                x=x,
                y=[chance] * len(x),
                mode="lines",
                name="majority-class baseline",
                line=dict(color="gray", dash="dash"),
            ),
        ]
    )
    fig.update_layout(
        title="Position probe accuracy by hidden state",
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="accuracy",
        yaxis_range=[0, 1.02],
        height=360,
        margin=_MARGIN,
    )
    return fig


def contribution_bars(
    contributions: np.ndarray, outliers: Sequence[int], top: int = 30, state_name: str = ""
) -> go.Figure:
    """Neuron contributions c(i) = mean |w_i v_i| (top dims), outlier dims in red."""
    order = np.argsort(-contributions, kind="stable")[:top]
    out = set(int(j) for j in outliers)
    colors = ["#d62728" if int(j) in out else "#1f77b4" for j in order]
    fig = go.Figure(
        go.Bar(
            x=[str(j) for j in order],
            y=contributions[order],
            marker_color=colors,
            hovertemplate="dim %{x}<br>c = %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Neuron contributions to the position probe at state {state_name} (red = outlier dim)",
        xaxis_title="dimension",
        yaxis_title="mean |w·v|",
        xaxis_type="category",
        height=360,
        margin=_MARGIN,
    )
    return fig


def contribution_heatmap(state_names: Sequence[str], contributions: np.ndarray) -> go.Figure:
    """Contributions normalised per state (share of the state's total), states x dims."""
    share = contributions / np.maximum(contributions.sum(axis=1, keepdims=True), 1e-300)
    fig = go.Figure(
        go.Heatmap(
            z=share,
            y=list(state_names),
            colorscale="Viridis",
            colorbar=dict(title="share"),
            hovertemplate="state %{y} · dim %{x}<br>share %{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Share of probe contribution per neuron",
        xaxis_title="dimension",
        yaxis_title="hidden state",
        yaxis_type="category",
        height=320,
        margin=_MARGIN,
    )
    return fig


def tupe_heatmaps(
    terms: dict[str, np.ndarray], real: np.ndarray, head: int, tokens: Sequence[str]
) -> go.Figure:
    """The four TUPE terms, the remainder and the real logits of one head (query rows, key columns)."""
    names = [*TERMS, "remainder"]
    titles = [TERM_LABELS[t] for t in names] + ["real logits (model)"]
    fig = make_subplots(
        rows=2, cols=3, subplot_titles=titles, horizontal_spacing=0.06, vertical_spacing=0.12
    )
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
    mats = [terms[t][head] for t in names] + [real[head]]
    bound = max(float(np.abs(m).max()) for m in mats) or 1.0
    for k, mat in enumerate(mats):
        fig.add_trace(
            go.Heatmap(
                z=mat,
                x=labels,
                y=labels,
                colorscale="RdBu",
                zmid=0,
                zmin=-bound,
                zmax=bound,
                showscale=k == 0,
                colorbar=dict(title="logit"),
                hovertemplate="query %{y}<br>key %{x}<br>%{z:.3f}<extra></extra>",
            ),
            row=k // 3 + 1,
            col=k % 3 + 1,
        )
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(
        title=f"First-layer attention logits of head {head}, split by TUPE (common colour scale)",
        height=620,
        margin=_MARGIN,
    )
    return fig


def tupe_share_bars(shares_by_region: dict[str, dict[str, float]]) -> go.Figure:
    """Share of mean |term| per region (all pairs, [CLS] row, [CLS] column, the rest)."""
    region_labels = {
        "all": "all pairs",
        "cls_row": "[CLS] row (query = first token)",
        "cls_column": "[CLS] column (key = first token)",
        "body": "other pairs",
    }
    fig = go.Figure(
        [
            go.Bar(
                x=[region_labels[r] for r in shares_by_region],
                y=[shares_by_region[r][t] for r in shares_by_region],
                name=TERM_LABELS[t],
            )
            for t in TERMS
        ]
    )
    fig.update_layout(
        title="Relative magnitude of the four terms: mean |term| / sum of the four",
        barmode="group",
        yaxis_title="share",
        height=360,
        margin=_MARGIN,
    )
    return fig


def variance_plot(
    curves, which: str = "attn", show_seeds: bool = True, title: str | None = None
) -> go.Figure:
    """Variance over features vs position (log-log), one line per layer, theory line dashed."""
    mean = curves.attn_mean if which == "attn" else curves.resid_mean
    std = curves.attn_std if which == "attn" else curves.resid_std
    slopes = curves.slopes if which == "attn" else curves.resid_slopes
    x = curves.positions
    fig = go.Figure()
    for i in range(mean.shape[0]):
        color = _LAYER_COLORS[i % len(_LAYER_COLORS)]
        if show_seeds and np.any(std[i] > 0):
            lower = np.maximum(mean[i] - std[i], mean[i] * 1e-3)
            fig.add_trace(
                go.Scatter(
                    x=np.concatenate([x, x[::-1]]),
                    y=np.concatenate([mean[i] + std[i], lower[::-1]]),
                    fill="toself",
                    fillcolor=color,
                    opacity=0.15,
                    line=dict(width=0),
                    hoverinfo="skip",
                    showlegend=False,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=mean[i],
                mode="lines",
                line=dict(color=color),
                name=f"layer {i + 1} (slope {slopes[i]:+.2f})",
                hovertemplate="position %{x}<br>variance %{y:.3e}<extra></extra>",
            )
        )
    if which == "attn" and curves.theory is not None:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=curves.theory,
                mode="lines",
                line=dict(color="black", dash="dash"),
                name="theory d·σo²·d·σ²/m" if curves.causal else "theory (bidirectional: /T)",
            )
        )
    what = "attention output" if which == "attn" else "residual stream"
    fig.update_layout(
        title=title or f"Variance over features of the {what} vs position",
        xaxis_title="position m (1-based)",
        yaxis_title="variance over features",
        height=420,
        margin=_MARGIN,
    )
    return log_axis(log_axis(fig, "x"), "y")


def _layer_numbers(stats, rows: int) -> tuple[int, ...]:
    """The layer (1..L) of each row of a q/k statistic: a hybrid's attention layers only."""
    return tuple(getattr(stats, "layer_numbers", None) or range(1, rows + 1))


def qk_heatmaps(stats_list: Sequence, metric: str, label: str) -> go.Figure:
    """One layers x query heads heatmap per model (trained / random) for one q/k metric; under
    grouped-query attention each column names the key head its query head attends with."""
    fig = make_subplots(
        rows=1,
        cols=len(stats_list),
        subplot_titles=[s.label for s in stats_list],
        horizontal_spacing=0.08,
    )
    values = [getattr(s, metric) for s in stats_list]
    lo = min(float(v.min()) for v in values)
    hi = max(float(v.max()) for v in values)
    diverging = metric == "cos_qk"
    for k, v in enumerate(values):
        layers, heads = v.shape
        kv = getattr(stats_list[k], "kv_head", None)
        grouped = kv is not None and len(kv) == heads and int(kv.max()) + 1 < heads
        fig.add_trace(
            go.Heatmap(
                z=v,
                x=[
                    f"h{h}·kv{kv[h]}" if grouped and kv is not None else f"h{h}"
                    for h in range(heads)
                ],
                y=[str(i) for i in _layer_numbers(stats_list[k], layers)],
                colorscale="RdBu" if diverging else "Viridis",
                zmid=0 if diverging else None,
                zmin=-1 if diverging else lo,
                zmax=1 if diverging else hi,
                showscale=k == 0,
                hovertemplate="layer %{y} · head %{x}<br>%{z:.3f}<extra></extra>",
            ),
            row=1,
            col=k + 1,
        )
        head_title = "query head · its key head" if grouped else "query head"
        fig.update_xaxes(title_text=head_title, row=1, col=k + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="layer", row=1, col=1)
    fig.update_layout(title=label, height=360, margin=_MARGIN)
    return fig


def qk_layer_lines(stats_list: Sequence, metric: str, label: str) -> go.Figure:
    """Head-averaged metric per layer, one line per model."""
    fig = go.Figure(
        [
            go.Scatter(
                x=list(_layer_numbers(s, getattr(s, metric).shape[0])),
                y=getattr(s, metric).mean(axis=1),
                mode="lines+markers",
                name=s.label,
            )
            for s in stats_list
        ]
    )
    fig.update_layout(
        title=f"{label}, mean over heads",
        xaxis_title="layer",
        yaxis_title=label,
        height=340,
        margin=_MARGIN,
    )
    return fig


# ----------------------------------------------------------------------------- image patch grid
def _cosine_heatmap(z: np.ndarray, hovertemplate: str) -> go.Heatmap:
    """Cosines on the diverging scale from -1 to 1 that both patch-grid figures use."""
    return go.Heatmap(
        z=z,
        colorscale="RdBu",
        zmid=0,
        zmin=-1,
        zmax=1,
        colorbar=dict(title="cos"),
        hovertemplate=hovertemplate,
    )


def patch_similarity_map(cosines: np.ndarray, row: int, col: int) -> go.Figure:
    """One patch's position-embedding similarity to every patch, on the patch grid
    (``cosines``: (rows, cols, rows, cols) from :func:`isoscope.analysis.positional.grid.patch_cosines`)."""
    fig = go.Figure(
        _cosine_heatmap(cosines[row, col], "patch r%{y}c%{x}<br>cos %{z:.3f}<extra></extra>")
    )
    fig.add_trace(
        go.Scatter(
            x=[col],
            y=[row],
            mode="markers",
            marker=dict(symbol="x", size=12, color="black"),
            name="chosen patch",
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        title=f"Position-embedding similarity of patch r{row}c{col} to every patch",
        xaxis_title="patch column",
        xaxis_constrain="domain",  # square patches narrow the plot instead of padding the axis
        yaxis_title="patch row",
        yaxis_autorange="reversed",
        yaxis_scaleanchor="x",
        showlegend=False,
        height=460,
        margin=_MARGIN,
    )
    return fig


def patch_similarity_multiples(cosines: np.ndarray) -> go.Figure:
    """Every patch's similarity map, laid out on the grid itself (Dosovitskiy et al. Fig. 7):
    the small map in tile (r, c) is patch (r, c)'s similarity to all patches. One heatmap of
    tiles with a blank line between them, so a 16x16 grid is one trace, not 256 subplots."""
    rows, cols = cosines.shape[:2]
    tiled = np.full((rows * (rows + 1) - 1, cols * (cols + 1) - 1), np.nan)
    for r in range(rows):
        for c in range(cols):
            tiled[
                r * (rows + 1) : r * (rows + 1) + rows, c * (cols + 1) : c * (cols + 1) + cols
            ] = cosines[r, c]
    fig = go.Figure(_cosine_heatmap(tiled, "cos %{z:.3f}<extra></extra>"))
    fig.update_layout(
        title="Similarity of position embeddings: tile (row, column) is that patch's map",
        xaxis=dict(showticklabels=False, showgrid=False, zeroline=False, constrain="domain"),
        yaxis=dict(
            showticklabels=False,
            showgrid=False,
            zeroline=False,
            autorange="reversed",
            scaleanchor="x",
        ),
        height=min(900, 120 + 12 * tiled.shape[0]),
        margin=_MARGIN,
    )
    return fig


def grid_probe_lines(state_names: Sequence[str], row, column) -> go.Figure:
    """Held-out accuracy of the row and column probes per hidden state, each with its baseline
    (``row`` / ``column``: :class:`isoscope.analysis.positional.table.ProbeResult`)."""
    x = list(state_names)
    fig = go.Figure()
    for probe, name, colour in ((row, "row", "#1f77b4"), (column, "column", "#ff7f0e")):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=probe.accuracy,
                mode="lines+markers",
                name=f"{name} (held-out images)",
                line=dict(color=colour),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[probe.chance] * len(x),
                mode="lines",
                name=f"{name}: majority baseline",
                line=dict(color=colour, dash="dash", width=1),
            )
        )
    fig.update_layout(
        title="Patch row / column probe accuracy by hidden state",
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="accuracy",
        yaxis_range=[0, 1.02],
        height=360,
        margin=_MARGIN,
    )
    return fig
