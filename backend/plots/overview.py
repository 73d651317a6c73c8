"""Figures and tables of the Overview page."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from isoscope.engine.store.provenance import reuse_line
from isoscope.plots.axes import lowest


def model_card_rows(model: dict) -> list[dict[str, str]]:
    """Model card as (field, value) rows."""
    params = model.get("num_parameters", 0)
    # the encoder of an encoder-decoder says so (isoscope.engine.load.models._role)
    role = [{"field": "role", "value": str(model["role"])}] if model.get("role") else []
    opened = [  # what the user opened (isoscope.engine.store.provenance); older cards have no path.
        # A Hub id's revision is the commit loaded, so the result can be reproduced.
        {"field": field, "value": str(model[key])}
        for field, key in (("path", "path"), ("Hub revision", "revision"))
        if model.get(key)
    ]
    reused = reuse_line(model)
    return [
        {"field": "name", "value": str(model.get("display_name", model.get("source")))},
        *opened,
        *([{"field": "statistics", "value": reused}] if reused else []),
        {
            "field": "architecture",
            "value": f"{model.get('architecture')} ({model.get('model_type')})",
        },
        *role,
        {"field": "layers", "value": str(model.get("num_layers"))},
        # the token mixers of every layer (older cards have none)
        *(
            [{"field": "layer pattern", "value": str(pattern)}]
            if (pattern := model.get("layer_pattern"))
            else []
        ),
        {"field": "width", "value": str(model.get("hidden_size"))},
        {"field": "attention heads", "value": str(model.get("num_heads"))},
        {"field": "parameters", "value": f"{params / 1e6:.1f} M" if params else "?"},
        {"field": "position embeddings", "value": str(model.get("position_embedding"))},
        {
            "field": "attention",
            "value": "causal (decoder)" if model.get("is_causal") else "bidirectional (encoder)",
        },
        {"field": "weights", "value": weights_line(model)},
        {"field": "device", "value": str(model.get("device"))},
    ] + (  # device_map="auto": where accelerate put the layers
        [{"field": "layers placed", "value": str(model["device_map"])}]
        if model.get("device_map")
        else []
    )


def weights_line(model: dict) -> str:
    """The card's weights line as the load measured it (isoscope.engine.load.weight_check); a card
    saved before that measurement existed says it was not checked."""
    if model.get("weights"):
        return str(model["weights"])
    if model.get("random_init"):
        return "random init"
    return "trained, not checked (this card was saved before isoscope checked the weights at load)"


def anisotropy_line(
    state_names: Sequence[str], anisotropy: np.ndarray, name: str = "anisotropy"
) -> go.Figure:
    """Mean cosine of random different-text token pairs per hidden state."""
    fig = go.Figure(
        go.Scatter(
            x=list(state_names), y=list(map(float, anisotropy)), mode="lines+markers", name=name
        )
    )
    fig.update_layout(
        title="Anisotropy by hidden state (mean cosine of random token pairs)",
        # category axis: "1".."L" look numeric, and plotly would then drop "emb" (index 0)
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="mean cosine",
        yaxis_range=[min(0.0, lowest(anisotropy) - 0.05), 1.0],
        height=340,
        margin=dict(l=40, r=20, t=50, b=40),
    )
    return fig


def anisotropy_with_lines(
    state_names: Sequence[str],
    anisotropy: np.ndarray,
    lines: Sequence[tuple[Sequence[float] | np.ndarray, str, str]],
    name: str = "raw",
) -> go.Figure:
    """:func:`anisotropy_line` with one more line per (values, label, dash): the report's and the
    tour's "outlier dims zeroed" curves, legend below the plot."""
    fig = anisotropy_line(state_names, anisotropy, name=name)
    for values, label, dash in lines:
        fig.add_trace(
            go.Scatter(
                x=list(state_names),
                y=[float(v) for v in values],
                mode="lines+markers",
                name=label,
                line=dict(dash=dash),
            )
        )
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return fig


def trained_vs_random_figure(
    state_names: Sequence[str],
    trained: Sequence[float] | np.ndarray,
    random: Sequence[float] | np.ndarray,
) -> go.Figure:
    """Anisotropy per hidden state of a model and of its random-init copy (the tour's step 3)."""
    fig = go.Figure(
        [
            go.Scatter(x=list(state_names), y=trained, mode="lines+markers", name="this model"),
            go.Scatter(
                x=list(state_names),
                y=random,
                mode="lines+markers",
                name="random init",
                line=dict(dash="dot"),
            ),
        ]
    )
    fig.update_layout(
        title="Anisotropy by hidden state: this model vs its random-init copy",
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="mean cosine",
        height=340,
        margin=dict(l=40, r=20, t=50, b=40),
    )
    return fig
