"""SmoothQuant's mappings (Xiao et al. 2023, arXiv 2211.10438), read from the model's own wiring
(:func:`isoscope.engine.arch.wiring`, one traced forward pass), for the recipe
(:mod:`isoscope.analysis.quant.recipe`): every norm inside a block whose output is the input of
projections, with *every* projection it feeds as the balance layers.

SmoothQuant folds ``1 / s`` into the norm's weight and ``s`` into each consumer's input columns, so
a norm is smoothed only when that fold is exact: all its consumers are ``nn.Linear`` (a fused expert
tensor, a router module or GPT-2's transposed ``Conv1D`` is not), its weight is as wide as their
inputs, and the norm's output is not also the residual stream (post-LN BERT). Mappings are written
as one regex per role when the same names repeat in every block (llm-compressor's own style), else
module by module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

import torch

from isoscope.analysis.quant.sites import public_names
from isoscope.engine.arch import wiring


@dataclass(frozen=True)
class Mapping:
    """One SmoothQuant mapping: the norm ``smooth`` whose output is the input of ``balance``
    (public module names, as the checkpoint and llm-compressor name them)."""

    layer: int
    role: str
    smooth: str
    balance: tuple[str, ...]
    gamma_offset: float = 0.0


@dataclass(frozen=True)
class Skipped:
    """A norm that feeds projections but is not smoothed, and why."""

    layer: int
    smooth: str
    reason: str


def matches(target: str, name: str) -> bool:
    """Whether module ``name`` is ``target``: a plain name, or ``re:`` and a regex (llm-compressor's
    targets)."""
    return re.match(target[3:], name) is not None if target.startswith("re:") else target == name


def norm_mappings(loaded) -> tuple[list[Mapping], list[Skipped], list[str]]:
    """SmoothQuant's mappings from the traced wiring (see the module docstring): the norms that can
    be smoothed exactly, those that cannot (and why), and notes."""
    wired = wiring(loaded)
    named = dict(loaded.model.named_modules())
    public = public_names(loaded)
    if wired.post_ln:
        return (
            [],
            [],
            [
                "the blocks' outputs are norm outputs (post-LN): the norm's output is also the residual "
                "stream, so folding SmoothQuant's scales into it would change the model; no mappings"
            ],
        )
    mappings, skipped = [], []
    for norm in wired.norms:
        if norm.layer is None or not norm.feeds_block:
            continue
        smooth = public(norm.path)
        consumers = _direct_consumers(norm.feeds_block)
        not_linear = [
            f"{public(p)} ({type(named[p]).__name__})"
            for p in consumers
            if type(named[p]) is not torch.nn.Linear
        ]
        narrow = _narrower_than_consumers(named[norm.path], [named[p] for p in consumers])
        if not_linear or narrow:
            reason = (
                "it also feeds " + ", ".join(not_linear[:3]) + ", which is not an nn.Linear "
                "whose input columns the scales can be folded into"
                if not_linear
                else narrow or ""
            )
            skipped.append(Skipped(norm.layer, smooth, reason))
            continue
        mappings.append(
            Mapping(
                norm.layer,
                norm.role,
                smooth,
                tuple(public(p) for p in consumers),
                float(norm.gamma_offset),
            )
        )
    return mappings, skipped, []


def _direct_consumers(feeds: tuple[str, ...]) -> tuple[str, ...]:
    """The modules that multiply a norm's output themselves: a consumer that holds another
    consumer (a Mamba mixer, whose own parameters make it look like a projection, hands its input
    to its in_proj) is left out."""
    return tuple(p for p in feeds if not any(q.startswith(p + ".") for q in feeds))


def _narrower_than_consumers(norm: torch.nn.Module, consumers: list) -> str | None:
    """Why a norm's weight cannot take SmoothQuant's per-column scales: it has fewer channels
    than its consumers' inputs (Gated DeltaNet's gated norm runs per head on d_head channels,
    one weight shared by every head of out_proj's input). None when the widths agree."""
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 1:
        return None
    for module in consumers:
        columns = getattr(module, "in_features", None)
        if isinstance(columns, int) and columns != weight.shape[0]:
            return (
                f"its weight has {weight.shape[0]} channels (shared across heads) but "
                f"{type(module).__name__} inputs have {columns} columns: the scales cannot be "
                "folded into it exactly"
            )
    return None


def regex_mappings(
    mappings: list[Mapping], module_names: set[str], blocks: str
) -> list[tuple[tuple[str, ...], str]]:
    """The mappings in llm-compressor's form: one ``re:`` target per name that repeats in every
    block where a role is smoothed (checked to match exactly those modules among
    ``module_names``), else the plain module names block by block."""
    out: list[tuple[tuple[str, ...], str]] = []
    by_role: dict[str, list[Mapping]] = {}
    for m in mappings:
        by_role.setdefault(m.role, []).append(m)
    block_re = re.compile(rf"^(.*{re.escape(blocks)}\.)(\d+)\.(.+)$")

    def suffix(name: str) -> str | None:
        found = block_re.match(name)
        return found.group(3) if found else None

    for role_maps in by_role.values():
        shapes = {(suffix(m.smooth), tuple(suffix(b) for b in m.balance)) for m in role_maps}
        if len(shapes) == 1 and None not in next(iter(shapes))[1] and next(iter(shapes))[0]:
            # checked: every suffix found
            smooth_sfx, balance_sfx = cast(tuple[str, tuple[str, ...]], next(iter(shapes)))
            targets = [f"re:.*\\.{re.escape(s)}$" for s in (*balance_sfx, smooth_sfx)]
            expected = [{m.smooth for m in role_maps}] + [
                {m.balance[k] for m in role_maps} for k in range(len(balance_sfx))
            ]
            found = [
                {n for n in module_names if matches(t, n)} for t in (targets[-1], *targets[:-1])
            ]
            if found == expected:
                out.append((tuple(targets[:-1]), targets[-1]))
                continue
        out += [(m.balance, m.smooth) for m in role_maps]
    return out
