"""Figures and tables of the dimension card (docs/methods.md, "One dimension, explained").

Builders take a :class:`isoscope.analysis.dimension.DimensionCard` and return Plotly figures or
pandas frames; nothing here runs a model."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from isoscope.analysis.dimension import DimensionCard
from isoscope.plots.axes import log_axis

STATISTICS = {  # the contribution columns a figure can show: key -> label
    "mean": "mean over tokens",
    "first_position": "at the first position",
    "other_positions": "at the other positions",
    "at_top": "at its top tokens",
}
# components summed into one bar per layer: heads into the token mixer, experts into the MLP
_FAMILY = {
    "attention head": "token mixer",
    "attention bias": "token mixer",
    "mixer": "token mixer",
    "expert": "MLP",
    "mlp rest": "MLP",
    "mlp": "MLP",
    "norm bias": "norm bias",
    "embedding": "embedding",
    "offset": "offset",
}
_COLOURS = {
    "embedding": "#8c8c8c",
    "token mixer": "#4c72b0",
    "MLP": "#dd8452",
    "norm bias": "#55a868",
    "offset": "#c44e52",
}


def _label(token: str) -> str:
    return token.replace("Ġ", "␣").replace("Ċ", "\\n").replace("▁", "␣") or "∅"


def contributions_frame(card: DimensionCard) -> pd.DataFrame:
    """One row per component (the JSON's ``contributions``)."""
    frame = pd.DataFrame(card.contributions)
    for column in ("head", "expert", "norm"):
        if column not in frame:
            frame[column] = None
    columns = ["layer", "component", "head", "expert", "norm", *STATISTICS]
    return frame[columns]


def contributions_figure(card: DimensionCard, statistic: str = "mean") -> go.Figure:
    """Stacked bars per layer (0 = embeddings): what each kind of component writes to the value,
    heads summed into the token mixer and experts into the MLP. The bars of all layers add up to
    the value (shown as a line at the right)."""
    frame = contributions_frame(card)
    frame["family"] = frame["component"].map(_FAMILY).fillna(frame["component"])
    summed = frame.groupby(["layer", "family"], sort=True)[statistic].sum().reset_index()
    fig = go.Figure()
    layers = [
        card.state_names[i] if i < len(card.state_names) else str(i) for i in range(card.state + 1)
    ]
    for family, colour in _COLOURS.items():
        part = summed[summed["family"] == family]
        if part.empty:
            continue
        fig.add_bar(
            x=[layers[i] if i < len(layers) else str(i) for i in part["layer"]],
            y=part[statistic],
            name=family,
            marker_color=colour,
            hovertemplate="layer %{x}<br>%{y:.4g}<extra>" + family + "</extra>",
        )
    total = float(frame[statistic].sum()) if frame[statistic].notna().all() else None
    fig.update_layout(
        barmode="relative",
        xaxis_title="layer (emb = the embeddings)",
        yaxis_title=f"contribution to {card.title}, {STATISTICS[statistic]}",
        title=None if total is None else f"the parts sum to {total:.4g}",
        height=380,
        margin=dict(t=40, b=40),
    )
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=layers)
    return fig


def by_state_figure(card: DimensionCard) -> go.Figure:
    """The value on every state: mean, at the first position, and the largest |value|."""
    states = [row["state"] for row in card.by_state]
    fig = go.Figure()
    for key, name, dash in (
        ("mean", "mean", "solid"),
        ("first_position", "first position", "dot"),
        ("other_positions", "other positions", "dash"),
        ("max_abs", "largest |value|", "dashdot"),
    ):
        fig.add_scatter(
            x=states, y=[row[key] for row in card.by_state], name=name, mode="lines+markers",
            line=dict(dash=dash),
        )  # fmt: skip
    chosen = card.state_names[card.state]
    fig.add_vline(x=states.index(chosen), line_color="#999", line_dash="dot")
    fig.update_layout(
        xaxis_title="hidden state", yaxis_title=card.title, height=320, margin=dict(t=20, b=40)
    )
    fig.update_xaxes(type="category")
    return fig


def histogram_figure(card: DimensionCard) -> go.Figure:
    """The histogram of the value over every token of the chosen state."""
    edges = card.histogram["edges"]
    centres = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    fig = go.Figure(go.Bar(x=centres, y=card.histogram["counts"], marker_color="#4c72b0"))
    fig.update_layout(
        xaxis_title=f"{card.title} at state {card.state_names[card.state]}",
        yaxis_title="tokens",
        bargap=0,
        height=300,
        margin=dict(t=20, b=40),
    )
    return log_axis(fig)


def top_tokens_frame(card: DimensionCard) -> pd.DataFrame:
    frame = pd.DataFrame(card.top_tokens)
    frame["token"] = frame["token"].map(_label)
    return frame[["end", "value", "token", "context", "text", "position"]]


def by_kind_frame(card: DimensionCard) -> pd.DataFrame:
    return pd.DataFrame(card.by_kind)


def by_position_frame(card: DimensionCard) -> pd.DataFrame:
    return pd.DataFrame(card.by_position)


def readers_frame(card: DimensionCard) -> pd.DataFrame:
    """One row per (norm, projection it feeds): gamma and beta at the dimension and how strongly
    the projection's weight reads it against its median column."""
    rows = []
    for reader in card.readers:
        base = {
            k: reader[k] for k in ("norm", "role", "layer", "gamma", "gamma_median_abs", "beta")
        }
        projections = reader["projections"] or [{}]
        for p in projections:
            rows.append(
                base
                | {
                    "projection": p.get("projection"),
                    "column_norm": p.get("column_norm"),
                    "median_column": p.get("median_column"),
                    "ratio": p.get("ratio"),
                }
            )
    return pd.DataFrame(rows)


def qk_share_figure(card: DimensionCard) -> go.Figure | None:
    """Heatmap of the share of each head's query-key logit the dimension carries (layer x head)."""
    if not card.qk_share:
        return None
    frame = pd.DataFrame(card.qk_share).pivot(index="layer", columns="head", values="share")
    fig = go.Figure(
        go.Heatmap(
            z=frame.to_numpy(), x=[str(h) for h in frame.columns], y=[str(i) for i in frame.index],
            colorscale="Viridis", zmin=0, colorbar=dict(title="share"),
            hovertemplate="layer %{y}, head %{x}<br>share %{z:.3f}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(xaxis_title="head", yaxis_title="layer", height=320, margin=dict(t=20, b=40))
    return fig


def logit_frame(card: DimensionCard) -> pd.DataFrame | None:
    if card.logit_effect is None:
        return None
    rows = [
        {"direction": side, "token": _label(t["token"]), "mean": t["mean"], "at_top": t["at_top"]}
        for side in ("promotes", "suppresses")
        for t in card.logit_effect[side]
    ]
    return pd.DataFrame(rows)


def ablation_frame(card: DimensionCard) -> pd.DataFrame | None:
    """The ablation's effect (zero, mean) for the dimension, each control and the controls' mean."""
    ab = card.ablation
    if ab is None:
        return None
    rows = [{"ablated": card.title, "mode": m} | ab[m] for m in ("zero", "mean")]
    for control in ab["controls"]:
        rows += [
            {"ablated": f"dim {control['dim']} (control)", "mode": m} | control[m]
            for m in ("zero", "mean")
        ]
    rows += [
        {"ablated": "controls' mean", "mode": m} | ab["controls_mean"][m]
        for m in ("zero", "mean")
        if ab["controls_mean"].get(m)
    ]
    return pd.DataFrame(rows)
