"""Figures and tables of the "Quantization readiness" page (docs/methods.md section 10).

Builders take a :class:`isoscope.analysis.quant.readiness.QuantReport` (or the token x channel
:class:`MagnitudeTiles` of one site) and return Plotly figures or pandas frames; nothing here runs
a model or computes a statistic.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from isoscope.analysis.quant.before_after import ChannelProfile
from isoscope.analysis.quant.readiness import MagnitudeTiles, QuantReport
from isoscope.analysis.quant.schemes import SCHEME_LABELS, SCHEMES
from isoscope.analysis.quant.sites import ROLE_LABELS, ROLES
from isoscope.plots.axes import log_axis


def _scheme_error(k: str) -> Callable[[dict], float]:
    """A site row's relative error under scheme ``k``."""
    return lambda r: r["error"][k]


# heat-strip quantities: key -> (label, value of a site row, log colour)
STRIP_QUANTITIES: dict[str, tuple[str, Callable[[dict], float], bool]] = {
    "max_over_median": ("max |x| / median |x|", lambda r: r["max_over_median"], True),
    "kurtosis": ("kurtosis (4th standardised moment)", lambda r: r["kurtosis"], True),
    "max_abs": ("max |x|", lambda r: r["max_abs"], True),
    **{
        f"error:{k}": (f"relative error, {SCHEME_LABELS[k]}", _scheme_error(k), False)
        for k in SCHEMES
    },
}


def sites_frame(report: QuantReport) -> pd.DataFrame:
    """One row per site: modules, layer, role, statistics and the error of every scheme."""
    rows = []
    for r in report.site_rows():
        rows.append(
            {
                "layer": r["layer"],
                "role": ROLE_LABELS.get(r["role"], r["role"]),
                "modules": ", ".join(m.rsplit(".", 1)[-1] for m in r["modules"]),
                "first module": r["modules"][0],
                "width": r["width"],
                "max |x|": r["max_abs"],
                "median |x|": r["median_abs"],
                "max/median": r["max_over_median"],
                "kurtosis": r["kurtosis"],
                "share |x|>=6": r["share_gt_6"],
                "top channels": ", ".join(str(t["channel"]) for t in r["top_channels"][:4]),
                **{SCHEME_LABELS[k]: r["error"][k] for k in SCHEMES},
            }
        )
    return pd.DataFrame(rows)


def heat_strip_figure(report: QuantReport, quantity: str = "max_over_median") -> go.Figure:
    """Layers x role heat strip of one quantity (log10 colour for ratios and kurtosis)."""
    label, value, log = STRIP_QUANTITIES[quantity]
    rows = report.site_rows()
    layers = sorted({r["layer"] for r in rows})
    roles = [role for role in ROLES if any(r["role"] == role for r in rows)]
    z = np.full((len(roles), len(layers)), np.nan)
    text = np.full(z.shape, "", dtype=object)
    for r in rows:
        if r["role"] not in roles:
            continue
        i, j = roles.index(r["role"]), layers.index(r["layer"])
        v = float(value(r))
        z[i, j] = math.log10(v) if log and v > 0 else v
        text[i, j] = f"{r['modules'][0]}<br>{label}: {v:.4g}"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=layers,
            y=[ROLE_LABELS[r] for r in roles],
            text=text,
            hovertemplate="block %{x}<br>%{text}<extra></extra>",
            colorscale="Viridis",
            colorbar={"title": f"log10 {label}" if log else label},
        )
    )
    fig.update_layout(
        title=label,
        xaxis_title="block",
        height=120 + 45 * len(roles),
        margin={"t": 40, "b": 40, "l": 10, "r": 10},
    )
    return fig


def magnitude_figure(tiles: MagnitudeTiles) -> go.Figure:
    """Token x channel |x| of one site, max-pooled tiles (log10 colour)."""
    z = np.log10(np.maximum(tiles.tiles, 1e-6))
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=np.arange(z.shape[1]) * tiles.channels_per_col,
            y=np.arange(z.shape[0]) * tiles.tokens_per_row,
            colorscale="Inferno",
            colorbar={"title": "log10 max |x|"},
            hovertemplate="tokens %{y}…<br>channels %{x}…<br>log10 max |x| %{z:.2f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=(
            f"{tiles.site}: {tiles.n_tokens:,} tokens x {tiles.width} channels "
            f"(tiles of {tiles.tokens_per_row} tokens x {tiles.channels_per_col} channels, max)"
        ),
        xaxis_title="input channel",
        yaxis_title="token (corpus order)",
        yaxis={"autorange": "reversed"},
        height=520,
        margin={"t": 50, "b": 40, "l": 10, "r": 10},
    )
    return fig


def scheme_figure(report: QuantReport) -> go.Figure:
    """Per scheme: the measured end metric (left) and the mean per-site error (right)."""
    labels = [SCHEME_LABELS[k] for k in SCHEMES]
    mean_error = [float(np.mean([e[k] for e in report.errors])) for k in SCHEMES]
    end = report.end
    has_end = end is not None
    fig = make_subplots(
        rows=1,
        cols=2 if has_end else 1,
        subplot_titles=(
            [_end_title(report), "mean per-site relative error"]
            if has_end
            else ["mean per-site relative error"]
        ),
    )
    if end is not None:  # has_end
        values = [_damage(report, end[k]) for k in SCHEMES]
        fig.add_trace(
            go.Bar(x=labels, y=values, marker_color="#c44e52", name="end metric"), row=1, col=1
        )
        log_axis(fig, "y", row=1, col=1)
    fig.add_trace(
        go.Bar(x=labels, y=mean_error, marker_color="#4c72b0", name="site error"),
        row=1,
        col=2 if has_end else 1,
    )
    fig.update_layout(showlegend=False, height=380, margin={"t": 40, "b": 40, "l": 10, "r": 10})
    return fig


def _damage(report: QuantReport, value: float) -> float:
    """KL as it is; a cosine as 1 - cosine (so that larger is worse on both)."""
    return value if report.metric == "kl" else 1.0 - value


def _end_title(report: QuantReport) -> str:
    return (
        "mean next-token KL(p_full || p_quant)"
        if report.metric == "kl"
        else "1 − cosine of the mean-pooled final state"
    )


def scheme_frame(report: QuantReport) -> pd.DataFrame:
    rows = []
    for k in SCHEMES:
        row = {
            "scheme": SCHEME_LABELS[k],
            "mean site error": float(np.mean([e[k] for e in report.errors])),
            "max site error": float(np.max([e[k] for e in report.errors])),
        }
        if report.end is not None:
            row[str(report.metric)] = report.end[k]  # an end metric is named
            if report.end.get("sts_spearman"):
                row["STS Spearman × 100"] = report.end["sts_spearman"][k]
                row["STS change"] = report.end["sts_spearman_change"][k]
        rows.append(row)
    return pd.DataFrame(rows)


def sensitivity_figure(report: QuantReport) -> go.Figure:
    """Per block: the end metric with only that block quantized (bars) and the block's mean
    per-site per-token error (line, right axis)."""
    sens = report.sensitivity or []
    layers = [r["layer"] for r in sens]
    proxy = report.layer_error("per_token")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Bar(
            x=layers,
            y=[_damage(report, r["end"]) for r in sens],
            name=_end_title(report),
            marker_color="#c44e52",
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=layers,
            y=[proxy.get(i, math.nan) for i in layers],
            name="mean per-site error (per token)",
            mode="lines+markers",
            line={"color": "#4c72b0"},
        ),
        secondary_y=True,
    )
    rho = report.spearman_error_vs_end()
    fig.update_layout(
        title="Only this block quantized (W8A8 per token)"
        + (f" · Spearman(error, end) = {rho:.2f}" if rho is not None else ""),
        xaxis_title="block",
        height=380,
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 50, "b": 40, "l": 10, "r": 10},
    )
    fig.update_yaxes(title_text=_end_title(report), secondary_y=False)
    fig.update_yaxes(title_text="relative error", secondary_y=True)
    return fig


def moved_figure(
    report: QuantReport, stats: list[dict], transform: str = "smoothquant"
) -> go.Figure:
    """What ``transform`` moved from the activations to the weights, per site: the per-token int8
    error of the input and the per-channel int8 error of the weight, before (dotted) and after
    (solid). Where the weight line ends above the activation line, the weight side is now the hard
    one. ``stats``: :func:`isoscope.analysis.quant.before_after.before_after` of the report's scan."""
    labels = [
        f"{s.site.layer}·{ROLE_LABELS.get(s.site.role, s.site.role)}" for s in report.scan.sites
    ]
    name = SCHEME_LABELS.get(transform, transform)
    fig = go.Figure()
    for side, colour in (("act_int8_error", "#1f77b4"), ("weight_int8_error", "#d62728")):
        what = "activation (per token)" if side.startswith("act") else "weight (per channel)"
        for stage, dash in (("before", "dot"), (transform, "solid")):
            fig.add_trace(
                go.Scatter(
                    x=labels,
                    y=[getattr(row[stage], side) for row in stats],
                    mode="lines+markers",
                    name=f"{what}, {'before' if stage == 'before' else 'after ' + name}",
                    line={"color": colour, "dash": dash},
                )
            )
    fig.update_layout(
        title=f"What {name} moved from activations to weights (int8 relative error per site)",
        yaxis={"title": "relative int8 error"},
        xaxis={"title": "site (block · role)"},
        legend={"orientation": "h", "y": -0.3},
    )
    return log_axis(fig, "y")


def channel_figure(profile: ChannelProfile) -> go.Figure:
    """Per input channel of one site, before (grey) and after ``profile.transform`` (colour): the
    activation max |x| (top) and the weight's input-channel range max |W| (bottom), log scale.
    SmoothQuant lowers the outlier channels' activations and raises the same weight columns; a
    rotation flattens both. ``profile``: :func:`isoscope.analysis.quant.before_after.channel_profile`."""
    name = SCHEME_LABELS.get(profile.transform, profile.transform)
    if profile.transform == "smoothquant":
        name += f" (α = {profile.alpha:g})"
    channels = np.arange(profile.act_before.size)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("activation max |x| per channel", "weight range max |W| per input channel"),
    )
    panels = (
        (1, "activation", profile.act_before, profile.act_after, "#1f77b4"),
        (2, "weight", profile.weight_before, profile.weight_after, "#d62728"),
    )
    for row, what, before, after, colour in panels:
        for stage, values, marker in (
            ("before", before, {"color": "#b0b0b0", "size": 4}),
            (f"after {name}", after, {"color": colour, "size": 4}),
        ):
            fig.add_trace(
                go.Scatter(
                    x=channels,
                    y=values,
                    mode="markers",
                    marker=marker,
                    name=f"{what}, {stage}",
                    hovertemplate="channel %{x}: %{y:.3g}<extra>" + f"{what}, {stage}</extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_layout(
        title=f"{profile.site}: per channel, before and after {name}",
        legend={"orientation": "h", "y": -0.15},
        height=560,
    )
    fig.update_xaxes(title_text="input channel", row=2, col=1)
    return log_axis(fig, "y")


def before_after_frame(report: QuantReport, stats: list[dict]) -> pd.DataFrame:
    """One row per site and stage (before, SmoothQuant, rotation): the activation's max / median,
    kurtosis, share of |x| >= 6 and int8 error, the weight's column max / median and int8 error."""
    rows = []
    for s, row in zip(report.scan.sites, stats, strict=True):
        for stage, side in row.items():
            rows.append(
                {
                    "layer": s.site.layer,
                    "role": ROLE_LABELS.get(s.site.role, s.site.role),
                    "stage": SCHEME_LABELS.get(stage, stage),
                    "act max/median": side.act_max_over_median,
                    "act kurtosis": side.act_kurtosis,
                    "act share |x|>=6": side.act_share_ge_6,
                    "act int8 error": side.act_int8_error,
                    "weight column max/median": side.weight_column_max_over_median,
                    "weight int8 error": side.weight_int8_error,
                }
            )
    return pd.DataFrame(rows)


def prefix_figure(report: QuantReport, curve: list[dict]) -> go.Figure:
    """The end metric with only blocks 1..k quantized per token, as a curve over k (``curve``:
    :func:`isoscope.analysis.quant.readiness.prefix_curve`), and the per-block sensitivity's
    running sum for comparison (where the curve rises faster, the errors compound)."""
    k = [r["layers"] for r in curve]
    fig = go.Figure(
        go.Scatter(
            x=k, y=[_damage(report, r["end"]) for r in curve], mode="lines+markers",
            name="blocks 1..k quantized",
        )
    )  # fmt: skip
    if report.sensitivity and len(report.sensitivity) == len(curve):
        running = np.cumsum([_damage(report, r["end"]) for r in report.sensitivity])
        fig.add_trace(
            go.Scatter(x=k, y=list(running), mode="lines", name="sum of blocks alone",
                       line={"dash": "dot"})
        )  # fmt: skip
    fig.update_layout(
        title="Layer-wise loss: only blocks 1..k quantized (W8A8 per token)",
        xaxis={"title": "k (blocks quantized, from the first)"},
        yaxis={"title": _end_title(report)},
    )
    return fig
