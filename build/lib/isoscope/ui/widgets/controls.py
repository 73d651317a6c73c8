"""Shared page controls: a slider built from a parameter's declaration, and the one group of
post-processing controls (Anisotropy, Clipping & projections), so the parameter ranges and help
texts cannot drift apart between pages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from isoscope.analysis.projections.postprocess import POSTPROCESSORS, parse_dims
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.params import Interval
from isoscope.ui.frame.literal import message
from isoscope.ui.widgets.ranges import post_options

ABTT_HELP = "Mu & Viswanath (2018) suggest D ≈ d/100."
WHITEN_HELP = (
    "Su et al. (2021) keep the first k whitened directions (k = 256 of 768 for BERT-base)."
)
AUTO = "auto"


def interval_slider(column, label: str, param: Interval, key: str, **kwargs) -> float:
    """``column.slider`` over ``param``'s range, default, step and help (its declaration)."""
    return column.slider(
        label, param.low, param.high, param.default, param.step, key=key,
        help=kwargs.pop("help", param.help or None), **kwargs,
    )  # fmt: skip


def interval_number(column, label: str, param: Interval, key: str, **kwargs) -> float:
    """``column.number_input`` over ``param``'s range and default (its declaration)."""
    cast = int if param.integer else float
    return column.number_input(
        label, cast(param.low), cast(param.high), cast(param.default), key=key,
        help=kwargs.pop("help", param.help or None), **kwargs,
    )  # fmt: skip


def choice_slider(column, label: str, param: Interval, key: str, **kwargs):
    """``column.select_slider`` over ``param``'s choices, at its default (its declaration)."""
    return column.select_slider(
        label, list(param.choices or ()), param.default, key=key,
        help=kwargs.pop("help", param.help or None), **kwargs,
    )  # fmt: skip


@dataclass(frozen=True)
class PostChoice:
    """A post-processing and its parameters, hashable (a cache key) and printable.

    ``params`` is a sorted tuple of (name, value); clip's ``dims`` is a tuple of ints, or "auto"
    for each hidden state's own headline outlier dims."""

    name: str
    params: tuple = ()

    @property
    def options(self) -> dict:
        return dict(self.params)

    @property
    def label(self) -> str:
        if self.name == "clip":
            dims = self.options.get("dims", ())
            if dims == AUTO:
                return "clipped: each state's detected outlier dims"
            return f"clipped dims {', '.join(map(str, dims)) or '(none)'}"
        return POSTPROCESSORS[self.name].label


def abtt_range(d: int) -> tuple[int, int, int]:
    """(min, max, default) of all-but-the-top's D: at least 1 (D = 0 is mean-centering), below d."""
    upper = max(1, d - 1)
    return 1, upper, min(upper, max(1, round(d / 100)))


def postprocessing_controls(
    prefix: str,
    hidden_size: int,
    columns: Sequence,
    *,
    include_none: bool = False,
    default: str = "clip",
    clip_dims: Sequence[int] | None = None,
    clip_label: str = "Dimensions to clip",
    clip_key: str = "clip_dims",
) -> PostChoice | None:
    """A post-processing select in ``columns[0]`` and its parameter in ``columns[1]``.

    Clip: with ``clip_dims`` (one hidden state) the field is pre-filled with them; without, an
    empty field means each hidden state's own detected outlier dims (give a ``clip_key`` per state
    so each state keeps its own entry). Returns None (after an ``st.error``) when the typed dims
    cannot be parsed. Widget keys start with ``prefix``."""
    names = list(post_options(include_none))
    name = columns[0].selectbox(
        "Post-processing",
        names,
        index=names.index(default),
        key=f"{prefix}_post",
        format_func=lambda n: POSTPROCESSORS[n].label,
        help="Fitted on the vectors of each hidden state, then applied to them; the model is untouched.",
    )
    where = columns[1]
    if name == "clip":
        per_state = clip_dims is None
        typed = where.text_input(
            clip_label,
            value="" if per_state else ", ".join(map(str, clip_dims)),
            key=f"{prefix}_{clip_key}",
            placeholder="empty = each state's detected outlier dims" if per_state else None,
            help="Comma-separated indices. "
            + (
                "Empty: clip, per hidden state, the outlier dims found by the z-score or "
                "extreme-index criterion."
                if per_state
                else "Pre-filled with the outlier dimensions detected at this hidden state "
                "(z-score or extreme-index criterion, see the Outlier dimensions page)."
            ),
        )
        if per_state and not typed.strip():
            return PostChoice("clip", (("dims", AUTO),))
        try:
            dims = parse_dims(typed, hidden_size)
        except IsoscopeError as exc:
            st.error(f"**{clip_label}:** {message(exc)}")
            return None
        if not dims:
            where.caption("No dimensions to clip: the vectors stay as they are.")
        return PostChoice("clip", (("dims", tuple(dims)),))
    if name == "abtt":
        low, high, value = abtt_range(hidden_size)
        n = where.number_input(
            "D: principal components removed",
            low,
            high,
            value,
            key=f"{prefix}_abtt_d",
            help=ABTT_HELP,
        )
        return PostChoice("abtt", (("n_components", int(n)),))
    if name == "whiten":
        k = where.number_input(
            "k: components kept (0 = all)",
            0,
            hidden_size,
            0,
            key=f"{prefix}_whiten_k",
            help=WHITEN_HELP,
        )
        return PostChoice("whiten", (("n_components", int(k) or None),))
    return PostChoice(name)
