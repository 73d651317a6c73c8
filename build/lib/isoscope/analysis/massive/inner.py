"""Outliers inside the token mixers: norms within a mixer (gated norms included) and the internal
inputs of state-space mixers.

The residual-stream views (massive activations, LLM.int8's norm outputs) read activations in the
model's width. Newer mixers have projections whose inputs live elsewhere, in the mixer's own
channels:

- a norm inside a mixer that feeds a projection: Mamba-2's and Gated DeltaNet's gated RMSNorm
  (``norm(y, gate)``, whose output is ``out_proj``'s input), Kimi-Linear's output norm,
  multi-head latent attention's ``q_a`` / ``kv_a`` norms (DeepSeek-V2, arXiv 2405.04434);
- the two inputs of a state-space mixer where Quamba (Chiang et al. 2024, arXiv 2410.13229) and
  MambaQuant (Xu et al. 2025, arXiv 2501.13484) find outliers: the SSM input ``x`` (after the
  causal conv and its activation: the input of Mamba's ``x_proj``; in Mamba-2, rebuilt from
  ``in_proj``'s output with the mixer's own conv1d and activation) and the input of ``out_proj``
  (the gated SSM output; Quamba's "extreme outliers").

A :class:`InnerSite` is one such activation; per site, over every non-padding token, we keep
the median |x| (a log histogram, within 1.2 %), the largest |x|, and per channel the number of
tokens with |x| >= 6 (LLM.int8's magnitude) and with |x| >= 6 / 0.6745 times the site's own median
(the scale-free rule of ``isoscope.analysis.massive.int8``). A channel is an outlier channel of
the site when one of the rules holds on >= 6 % of the tokens. The cross-layer rule of LLM.int8
(>= 25 % of the sites) is not applied: each site has its own channels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from isoscope.analysis.massive.int8 import RELATIVE, TOKEN_SHARE, batch_first, far_from_unit
from isoscope.analysis.massive.loghist import N_BINS, log_histogram, median_from_histogram
from isoscope.engine.arch.mixers import STATE_SPACE_KINDS
from isoscope.engine.device import to_numpy
from isoscope.engine.params import LLM_INT8_THRESHOLD

NORM_OUTPUT, SSM_INPUT, OUT_PROJ_INPUT = "norm output", "SSM input", "out_proj input"
SITE_KINDS = (NORM_OUTPUT, SSM_INPUT, OUT_PROJ_INPUT)


@dataclass(frozen=True)
class InnerSite:
    """One activation inside a mixer: ``name`` (``L3.mixer.out_proj:in``), ``kind``
    (:data:`SITE_KINDS`), ``path`` of the module read, ``layer`` 1..L and the ``mixer`` kind."""

    name: str
    kind: str
    path: str
    layer: int
    mixer: str


@dataclass(frozen=True)
class InnerReading:
    """Per site (in :attr:`sites` order): ``width`` (channels per token), ``median_abs``,
    ``max_abs``, ``absolute`` / ``relative``: the outlier channels by |x| >= 6 and by |x| >=
    RELATIVE x the median, each on >= 6 % of the tokens."""

    sites: tuple[InnerSite, ...]
    width: tuple[int, ...]
    median_abs: np.ndarray
    max_abs: np.ndarray
    absolute: tuple[tuple[int, ...], ...]
    relative: tuple[tuple[int, ...], ...]
    n_tokens: int

    def to_dict(self) -> list[dict]:
        off = far_from_unit(self.median_abs)
        return [
            {
                "name": site.name,
                "kind": site.kind,
                "mixer": site.mixer,
                "layer": site.layer,
                "path": site.path,
                "width": self.width[i],
                "median_abs": float(self.median_abs[i]),
                "max_abs": float(self.max_abs[i]),
                "max_over_median": float(self.max_abs[i] / max(self.median_abs[i], 1e-12)),
                "off_scale": bool(off[i]),
                "outlier_channels": list(self.absolute[i]),
                "scale_free_outlier_channels": list(self.relative[i]),
            }
            for i, site in enumerate(self.sites)
        ]


def per_token(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """(N, c): the channels of each of the batch's N non-padding tokens, from a (B, T, ...)
    activation or one flattened over tokens (and heads: Gated DeltaNet's norm runs on
    (B * T * heads, d_head)), or with extra axes of size one around the tokens ((B, 1, T, c)).
    None when ``x`` is not laid out by token."""
    b, t = mask.shape
    x = batch_first(x, mask)  # sequence-first, or padded inside the model
    if x.ndim >= 2 and tuple(x.shape[:2]) == (b, t):
        return x.reshape(b, t, -1)[mask]
    if x.numel() % (b * t) == 0 and x.shape[0] % (b * t) == 0:
        return x.reshape(b, t, -1)[mask]
    lead = [n for n in x.shape[:-1] if n != 1]
    if x.ndim > 3 and lead == [n for n in (b, t) if n != 1]:  # (B, 1, T, c): an extra axis
        return x.reshape(b, t, -1)[mask]
    return None


class InnerAccumulator:
    """Streams the per-site counts; a site's width is taken from its first call. Set :attr:`mask`
    (B, T) bool before each forward pass; :meth:`hook_output` / :meth:`hook_input` give hooks,
    :meth:`add` takes an activation read any other way."""

    def __init__(self, sites: list[InnerSite], device: torch.device) -> None:
        self.sites = list(sites)
        n = len(sites)
        self.device = device
        self.counts: list[torch.Tensor | None] = [None] * n
        self.relative_counts: list[torch.Tensor | None] = [None] * n
        self.hist = torch.zeros(n, N_BINS, dtype=torch.int64, device=device)
        self.max_abs = torch.zeros(n, dtype=torch.float64, device=device)
        self.tokens = [0] * n
        self.mask: torch.Tensor | None = None

    def add(self, site: int, x: torch.Tensor) -> None:
        if self.mask is None:
            return
        values = per_token(x.detach(), self.mask.to(x.device))
        if values is None or not values.numel():
            return
        values = values.abs().float().to(self.device)  # (N, c)
        counts, relative = self.counts[site], self.relative_counts[site]
        if counts is None or relative is None:  # both set together, on the site's first call
            width = values.shape[1]
            counts = self.counts[site] = torch.zeros(width, dtype=torch.int64, device=self.device)
            relative = self.relative_counts[site] = torch.zeros(
                width, dtype=torch.int64, device=self.device
            )
        if values.shape[1] != counts.shape[0]:
            return  # a call of another shape (not by token): not this site's activation
        self.tokens[site] += values.shape[0]
        counts += (values >= LLM_INT8_THRESHOLD).sum(dim=0)  # in place: the listed tensors
        median = values.flatten().median()
        relative += (values >= RELATIVE * median).sum(dim=0)
        self.hist[site] += log_histogram(values)
        self.max_abs[site] = torch.maximum(self.max_abs[site], values.max().double())

    def hook_output(self, site: int, transform: Callable | None = None) -> Callable:
        """A forward hook reading the module's output (through ``transform``, if given)."""

        def fn(module, inputs, output) -> None:
            x = output[0] if isinstance(output, tuple) else output
            if isinstance(x, torch.Tensor):
                self.add(site, x if transform is None else transform(x))

        return fn

    def hook_input(self, site: int) -> Callable:
        def fn(module, inputs) -> None:
            if inputs and isinstance(inputs[0], torch.Tensor):
                self.add(site, inputs[0])

        return fn

    def finish(self) -> InnerReading:
        def channels(counts: torch.Tensor | None, n: int) -> tuple[int, ...]:
            if counts is None or not n:
                return ()
            share = to_numpy(counts) / n
            return tuple(int(j) for j in np.flatnonzero(share >= TOKEN_SHARE))

        return InnerReading(
            sites=tuple(self.sites),
            width=tuple(0 if c is None else int(c.shape[0]) for c in self.counts),
            median_abs=median_from_histogram(to_numpy(self.hist, dtype=None)),
            max_abs=to_numpy(self.max_abs),
            absolute=tuple(channels(c, n) for c, n in zip(self.counts, self.tokens, strict=True)),
            relative=tuple(
                channels(c, n) for c, n in zip(self.relative_counts, self.tokens, strict=True)
            ),
            n_tokens=max(self.tokens, default=0),
        )


# ----------------------------------------------------------------------------- the sites


def mixer_hooks(
    loaded, pattern, int8_paths: set[str], device: torch.device
) -> tuple[InnerAccumulator | None, dict, dict]:
    """The accumulator of the sites inside the mixers (:func:`inner_sites`) with its forward
    hooks and forward pre-hooks (for ``isoscope.engine.arch.hooks.forward_hooks``); None and no hooks
    when the model has no such site."""
    sites, outputs, inputs = inner_sites(loaded, pattern, int8_paths)
    if not sites:
        return None, {}, {}
    acc = InnerAccumulator(sites, device)
    hooks: dict = {}
    for module, (i, transform) in outputs.items():
        hooks.setdefault(module, []).append(acc.hook_output(i, transform))
    pre_hooks = {module: acc.hook_input(i) for module, i in inputs.items()}
    return acc, hooks, pre_hooks


def inner_sites(
    loaded, pattern, int8_paths: set[str]
) -> tuple[list[InnerSite], dict[torch.nn.Module, tuple[int, Callable | None]], dict]:
    """The sites inside the mixers of ``loaded`` and where to read them: ``(sites, outputs,
    inputs)``, ``outputs``: {module: (site, transform)} read by forward hooks, ``inputs``:
    {module: site} read by forward pre-hooks.

    State-space sites: per Mamba / Mamba-2 mixer of the layer pattern, the SSM input (the input
    of ``x_proj``; without one, rebuilt from ``in_proj``'s output by
    :func:`ssm_input_from_in_proj`) and the input of ``out_proj`` (in Mamba-2, the gated norm's
    output). Norm sites: every other norm inside a block whose output is the input of a
    projection (the traced wiring; gated norms included, their gate passed through untouched:
    the hooks read outputs only) and that is not one of LLM.int8's residual-width sites
    (``int8_paths``)."""
    from isoscope.engine.arch import wiring
    from isoscope.engine.errors import UnsupportedModelError

    model = loaded.model
    named = dict(model.named_modules())
    mixers = _mixers_by_layer(pattern)
    sites: list[InnerSite] = []
    outputs: dict = {}
    inputs: dict = {}

    def add(kind, path, layer, read_output, transform=None, name=None):
        module = named.get(path)
        if module is None or module in outputs or module in inputs:
            return
        mixer = next((k for p, k in mixers.get(layer, ()) if path.startswith(p + ".")), "")
        short = (name or path).split(f".{layer - 1}.", 1)[-1]
        sites.append(InnerSite(f"L{layer}.{short}", kind, path, layer, mixer))
        if read_output:
            outputs[module] = (len(sites) - 1, transform)
        else:
            inputs[module] = len(sites) - 1

    read: set[str] = set()  # the projections whose input a state-space site reads
    for layer, found in mixers.items():
        for path, kind in found:
            mixer = named.get(path)
            if kind not in STATE_SPACE_KINDS or mixer is None:
                continue
            x_proj = getattr(mixer, "x_proj", None)
            in_proj = getattr(mixer, "in_proj", None)
            if isinstance(x_proj, torch.nn.Module):
                add(SSM_INPUT, f"{path}.x_proj", layer, False, name=f"{path}:ssm_input")
            elif isinstance(in_proj, torch.nn.Module) and _rebuildable(mixer):
                rebuild = _rebuilder(mixer)
                add(SSM_INPUT, f"{path}.in_proj", layer, True, rebuild, f"{path}:ssm_input")
            if isinstance(getattr(mixer, "out_proj", None), torch.nn.Module):
                add(OUT_PROJ_INPUT, f"{path}.out_proj", layer, False, name=f"{path}:out_proj_input")
                read.add(f"{path}.out_proj")
    try:
        norms = wiring(model).norms
    except UnsupportedModelError:
        norms = ()
    for norm in norms:
        if norm.layer is None or not norm.feeds_block or norm.path in int8_paths:
            continue
        if set(norm.feeds_block) <= read:
            continue  # Mamba-2's gated norm: its output is the out_proj input read above
        add(NORM_OUTPUT, norm.path, norm.layer + 1, True)
    return sites, outputs, inputs


def _mixers_by_layer(pattern) -> dict[int, list[tuple[str, str]]]:
    """{layer 1..L: [(mixer path in the full model, kind)]} of a layer pattern."""
    if pattern is None:
        return {}
    return {k.layer: [(m.path, m.kind) for m in k.mixers] for k in pattern.layers}


def _rebuildable(mixer: torch.nn.Module) -> bool:
    """Whether a Mamba-2 mixer has what :func:`ssm_input_from_in_proj` reads."""
    conv = getattr(mixer, "conv1d", None)
    out_proj = getattr(mixer, "out_proj", None)
    return (
        isinstance(conv, torch.nn.Conv1d)
        and isinstance(getattr(mixer, "A_log", None), torch.Tensor)
        and isinstance(getattr(out_proj, "weight", None), torch.Tensor)
        and isinstance(getattr(mixer, "activation", None), str)
    )


def ssm_input_from_in_proj(mixer: torch.nn.Module, projected: torch.Tensor) -> torch.Tensor:
    """A Mamba-2 mixer's SSM input x (B, T, d_ssm), rebuilt from ``in_proj``'s output (B, T, P)
    as the mixer computes it: in_proj's output is [(z0, x0,) gate, xBC, dt] (Dao & Gu 2024), dt
    one channel per head (``A_log``), xBC the conv1d's channels; a causal depthwise conv of xBC,
    the mixer's activation, and x its first d_ssm (``out_proj``'s input width) channels. A
    ``mup_vector`` buffer (Falcon-H1's muP multipliers of in_proj's output) is applied first."""
    from transformers.activations import ACT2FN

    conv = cast(torch.nn.Conv1d, mixer.conv1d)
    heads = int(cast(torch.Tensor, mixer.A_log).numel())
    conv_dim = int(conv.weight.shape[0])
    d_ssm = int(cast(torch.nn.Linear, mixer.out_proj).weight.shape[1])
    mup = getattr(mixer, "mup_vector", None)
    if isinstance(mup, torch.Tensor) and mup.shape[-1] == projected.shape[-1]:
        projected = projected * mup
    end = projected.shape[-1] - heads
    xbc = projected[..., end - conv_dim : end].transpose(1, 2)  # (B, conv_dim, T)
    t = xbc.shape[-1]
    kernel = int(conv.weight.shape[-1])
    out = torch.nn.functional.conv1d(
        xbc.to(conv.weight.dtype), conv.weight, conv.bias, padding=kernel - 1, groups=conv_dim
    )[..., :t]
    return ACT2FN[mixer.activation](out).transpose(1, 2)[..., :d_ssm]


def _rebuilder(mixer: torch.nn.Module) -> Callable:
    return lambda projected: ssm_input_from_in_proj(mixer, projected)
