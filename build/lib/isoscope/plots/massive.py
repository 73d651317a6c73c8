"""Figures and tables of the "Massive activations & sinks" page (docs/methods.md section 7).

Builders take the results of :mod:`isoscope.analysis.massive.scan` (massive activations, sinks,
int8 features), :mod:`~isoscope.analysis.massive.magnitudes` (one text) and
:mod:`~isoscope.analysis.massive.first_position`, and return Plotly figures or pandas frames;
nothing here runs a model. Image and speech models' figures: :mod:`isoscope.plots.highnorm`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from isoscope.analysis.massive.int8 import SITE_SHARE, Int8Stats
from isoscope.analysis.massive.magnitudes import TextMagnitudes
from isoscope.analysis.massive.massive import MassiveStats
from isoscope.analysis.massive.sinks import SinkStats
from isoscope.engine.params import LLM_INT8_THRESHOLD, percent
from isoscope.plots.axes import log_axis

_TOP_COLOURS = ("#4c72b0", "#55a868", "#8172b2")


def _label(token: str) -> str:
    """A token as shown on an axis: byte-level markers made readable (Ġ = space, Ċ = newline)."""
    return token.replace("Ġ", "␣").replace("Ċ", "\\n").replace("▁", "␣") or "∅"


MASSIVE_LINE = 100.0  # Sun et al.'s absolute threshold for a massive activation


def magnitudes_by_layer_figure(stats: MassiveStats) -> go.Figure:
    """Top-1/2/3 |h| and the median |h| per hidden state, log scale (Sun et al., Fig. 2)."""
    fig = go.Figure()
    x = list(stats.state_names)
    for k in range(stats.top_value.shape[1]):
        hover = [
            f"top {k + 1}: {stats.top_value[s, k]:,.1f}<br>dim {stats.top_dim[s, k]}, "
            f"position {stats.top_position[s, k]}, token {_label(str(stats.top_token[s, k]))}"
            for s in range(len(x))
        ]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=stats.top_value[:, k],
                name=f"top {k + 1}",
                mode="lines+markers",
                line={"color": _TOP_COLOURS[k % 3]},
                hovertext=hover,
                hoverinfo="text",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=stats.median_abs,
            name="median |h|",
            mode="lines+markers",
            line={"color": "#555555", "dash": "dot"},
            marker={"symbol": "triangle-down"},
        )
    )
    # On a log axis plotly.py places add_hline's line in data units but its annotation in log10
    # units: annotation_text="|h| = 100" put the label at 10^100 and stretched the axis to 10^98.
    fig.add_hline(y=MASSIVE_LINE, line_dash="dash", line_color="#c44e52")
    fig.add_annotation(
        x=1,
        xref="x domain",
        y=np.log10(MASSIVE_LINE),
        yref="y",
        text=f"|h| = {MASSIVE_LINE:g}",
        showarrow=False,
        xanchor="right",
        yanchor="bottom",
    )
    fig.update_layout(
        xaxis_title="hidden state",
        xaxis_type="category",  # "1".."L" look numeric: plotly would drop "emb"
        yaxis_title="|h|",
        height=380,
        margin={"t": 30, "b": 40},
        legend={"orientation": "h", "y": 1.1},
    )
    return log_axis(fig, "y")


_CARRIER_LABELS = {
    "first": "at first position",
    "delimiter": "at delimiters",
    "other": "at other tokens",
}


def massive_frame(stats: MassiveStats) -> pd.DataFrame:
    """One row per hidden state: top |h| with dim/position/token, median, ratio, counts, carriers."""
    rows = []
    for s, name in enumerate(stats.state_names):
        c = stats.carriers[s]
        rows.append(
            {
                "hidden state": name,
                "largest |h|": round(float(stats.top_value[s, 0]), 2),
                "dim": int(stats.top_dim[s, 0]),
                "position": int(stats.top_position[s, 0]),
                "token": _label(str(stats.top_token[s, 0])),
                "median |h|": round(float(stats.median_abs[s]), 4),
                "largest / median": round(float(stats.ratio[s]), 1),
                "|h| > 100": int(stats.n_above_100[s]),
                "massive": int(stats.n_massive[s]),
                **{
                    _CARRIER_LABELS.get(kind, f"at {kind}"): int(count)
                    for kind, count in c.items()
                    if kind not in ("dims", "tokens")
                },
                "massive dims": ", ".join(f"{d} ({n})" for d, n in c["dims"]),
            }
        )
    return pd.DataFrame(rows)


def layer_position_figure(view: TextMagnitudes) -> go.Figure:
    """Largest |h| of each (hidden state, position) of one text, log colour (layers x positions)."""
    peak = view.peak  # (S, T)
    labels = [f"{i}: {_label(t)}" for i, t in enumerate(view.tokens)]
    hover = [
        [
            f"state {view.state_names[s]}, position {labels[p]}<br>max |h| {peak[s, p]:,.2f} "
            f"in dim {view.peak_dim[s, p]}"
            for p in range(peak.shape[1])
        ]
        for s in range(peak.shape[0])
    ]
    fig = go.Figure(
        go.Heatmap(
            z=np.log10(np.maximum(peak, 1e-6)),
            x=labels,
            y=list(view.state_names),
            colorscale="Viridis",
            colorbar={"title": "log10 max |h|"},
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.update_layout(
        xaxis_title="position: token",
        yaxis_title="hidden state",
        yaxis_type="category",
        height=max(320, 16 * len(view.state_names) + 120),
        margin={"t": 20, "b": 80},
    )
    return fig


def feature_token_figure(view: TextMagnitudes, state: int) -> go.Figure:
    """|h| over dims x tokens at one hidden state as a 3D surface (Sun et al., Fig. 1)."""
    magnitude = view.magnitude[state]  # (T, d)
    labels = [f"{i}: {_label(t)}" for i, t in enumerate(view.tokens)]
    fig = go.Figure(
        go.Surface(
            z=magnitude.T,  # rows = dims, columns = tokens
            x=list(range(len(labels))),
            y=list(range(magnitude.shape[1])),
            colorscale="Blues",
            showscale=False,
            hovertemplate="position %{x}<br>dim %{y}<br>|h| %{z:,.1f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=520,
        margin={"t": 10, "b": 10, "l": 0, "r": 0},
        scene={
            "xaxis": {
                "title": "token",
                "tickvals": list(range(len(labels))),
                "ticktext": labels,
            },
            "yaxis": {"title": "dim"},
            "zaxis": {"title": "|h|"},
            "camera": {"eye": {"x": -1.6, "y": -1.6, "z": 0.9}},
        },
    )
    return fig


def top_dims_frame(view: TextMagnitudes, state: int, k: int = 4) -> pd.DataFrame:
    """|h| of the text's ``k`` largest dims at one state, per token (the figure's numbers)."""
    dims = view.top_dims(state, k)
    frame = pd.DataFrame({"position": range(len(view.tokens)), "token": view.tokens})
    for d in dims:
        frame[f"dim {d}"] = np.round(view.magnitude[state][:, d], 3)
    return frame


def sink_heatmap_figure(sinks: SinkStats) -> go.Figure:
    """alpha (attention to the first token, averaged over queries and texts) per layer and head."""
    layers = [str(layer) for layer in sinks.layer_numbers]
    fig = go.Figure(
        go.Heatmap(
            z=sinks.alpha,
            x=[f"head {h}" for h in range(sinks.alpha.shape[1])],
            y=layers,
            zmin=0,
            zmax=1,
            colorscale="YlGnBu",
            colorbar={"title": "alpha"},
            hovertemplate="layer %{y}, %{x}<br>alpha %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        xaxis_title="head",
        yaxis_title="layer",
        height=max(300, 14 * len(layers) + 120),
        margin={"t": 20},
    )
    return fig


def sink_share_figure(sinks: SinkStats) -> go.Figure:
    """Share of heads with alpha > threshold, per layer."""
    layers = [str(layer) for layer in sinks.layer_numbers]
    fig = go.Figure(
        go.Bar(x=layers, y=sinks.share_per_layer, marker_color="#4c72b0", name="sink share")
    )
    fig.add_hline(
        y=sinks.share,
        line_dash="dash",
        annotation_text=f"all heads: {sinks.share:.0%}",
        line_color="#c44e52",
    )
    fig.update_layout(
        xaxis_title="layer",
        yaxis_title=f"heads with alpha > {sinks.threshold}",
        yaxis_range=[0, 1.05],
        yaxis_tickformat=".0%",
        height=300,
        margin={"t": 20},
    )
    return fig


def sink_frame(sinks: SinkStats) -> pd.DataFrame:
    frame = pd.DataFrame(
        sinks.alpha, columns=[f"head {h}" for h in range(sinks.alpha.shape[1])]
    ).round(4)
    frame.insert(0, "layer", list(sinks.layer_numbers))
    frame["sink share"] = sinks.share_per_layer
    return frame


def int8_figure(int8: Int8Stats, top: int = 20) -> go.Figure:
    """Each dim's share of norm sites where it counts (|x| >= LLM_INT8_THRESHOLD on >= TOKEN_SHARE
    of the tokens), the largest ``top``."""
    ranked = np.argsort(-int8.site_share, kind="stable")[:top]
    order = [int(j) for j in ranked if int8.site_share[j] > 0] or [int(ranked[0])]
    fig = go.Figure(
        go.Bar(
            x=[f"dim {j}" for j in order],
            y=int8.site_share[order],
            marker_color=[
                "#c44e52" if int8.site_share[j] >= SITE_SHARE else "#4c72b0" for j in order
            ],
        )
    )
    fig.add_hline(
        y=SITE_SHARE,
        line_dash="dash",
        annotation_text=f"outlier feature: {percent(SITE_SHARE)} of sites",
    )
    fig.update_layout(
        yaxis_title="share of norm sites",
        yaxis_tickformat=".0%",
        yaxis_range=[0, 1.05],
        height=300,
        margin={"t": 20},
    )
    return fig


def int8_frame(int8: Int8Stats, top: int = 20) -> pd.DataFrame:
    """Per site: largest |x| and the token share with |x| >= LLM_INT8_THRESHOLD of the top dims."""
    dims = [d["dim"] for d in int8.ranked_dims()[:top]]
    frame = pd.DataFrame({"site": int8.site_names, "max |x|": np.round(int8.max_abs, 2)})
    for d in dims:
        frame[f"dim {d}: tokens with |x| >= {LLM_INT8_THRESHOLD:g}"] = np.round(
            int8.token_share[:, d], 4
        )
    return frame


def inner_frame(inner) -> pd.DataFrame:
    """Per site inside a mixer (``isoscope.analysis.massive.inner``): its kind, mixer, width,
    median and largest |x|, and its outlier channels (|x| >= 6, and the scale-free rule)."""
    rows = inner.to_dict()
    return pd.DataFrame(
        {
            "site": [r["name"] for r in rows],
            "kind": [r["kind"] for r in rows],
            "mixer": [r["mixer"] for r in rows],
            "channels": [r["width"] for r in rows],
            "median |x|": [round(r["median_abs"], 4) for r in rows],
            "max |x|": [round(r["max_abs"], 3) for r in rows],
            "max / median": [round(r["max_over_median"], 1) for r in rows],
            f"channels with |x| >= {LLM_INT8_THRESHOLD:g}": [
                ", ".join(map(str, r["outlier_channels"][:10])) for r in rows
            ],
            "scale-free outlier channels": [
                ", ".join(map(str, r["scale_free_outlier_channels"][:10])) for r in rows
            ],
        }
    )


def first_position_figure(contrast) -> go.Figure:
    """Anisotropy by hidden state with and without the first position of every text."""
    x = list(contrast.state_names)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=x, y=contrast.anisotropy_with, name="all positions", mode="lines+markers")
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=contrast.anisotropy_without,
            name="first position excluded",
            mode="lines+markers",
            line={"dash": "dash"},
        )
    )
    fig.update_layout(
        xaxis_title="hidden state",
        xaxis_type="category",
        yaxis_title="anisotropy (mean cosine)",
        height=320,
        margin={"t": 20},
        legend={"orientation": "h", "y": 1.12},
    )
    return fig


def first_position_frame(contrast) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "hidden state": list(contrast.state_names),
            "anisotropy, all positions": np.round(contrast.anisotropy_with, 4),
            "anisotropy, first position excluded": np.round(contrast.anisotropy_without, 4),
            "largest |mean|, all positions": np.round(contrast.max_abs_mean_with, 3),
            "largest |mean|, first position excluded": np.round(contrast.max_abs_mean_without, 3),
        }
    )


def massive_summary_figure(m: MassiveStats, sinks: SinkStats | None) -> go.Figure:
    """Top |h| and median |h| per hidden state (log scale); sink share per layer when measured."""
    from plotly.subplots import make_subplots

    names = list(m.state_names)
    cols = 2 if sinks is not None else 1
    fig = make_subplots(
        rows=1,
        cols=cols,
        subplot_titles=["largest and median |h| per hidden state"]
        + (["share of heads that are attention sinks"] if sinks is not None else []),
    )
    fig.add_trace(
        go.Scatter(x=names, y=m.top_value[:, 0], mode="lines+markers", name="largest |h|"),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=names, y=m.median_abs, mode="lines+markers", name="median |h|", line=dict(dash="dot")
        ),
        row=1,
        col=1,
    )
    log_axis(fig, "y", row=1, col=1).update_yaxes(title_text="|h|", row=1, col=1)
    if sinks is not None:
        fig.add_trace(
            go.Bar(
                x=[str(layer) for layer in sinks.layer_numbers],
                y=sinks.share_per_layer,
                name="sink share",
            ),
            row=1,
            col=2,
        )
        fig.update_yaxes(range=[0, 1], title_text="share of heads", row=1, col=2)
    fig.update_xaxes(type="category", title_text="hidden state / layer")
    fig.update_layout(height=360, margin=dict(l=50, r=20, t=50, b=40))
    return fig
