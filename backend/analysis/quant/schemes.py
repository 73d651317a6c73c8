"""Fake quantizers and the simulated error of one site, ``||Y_q - Y||_F / ||Y||_F`` with ``Y = x Wᵀ``.

All quantizers are *symmetric absmax*: ``scale = max|.| / qmax``, ``q = clamp(round(v / scale),
-qmax, qmax) * scale`` (``torch.round``: half to even), with ``qmax = 127`` for int8 and ``7`` for
int4. Shapes: activations ``x`` (N, in) with one row per token, weights ``W`` (out, in) as
``nn.Linear`` keeps them (GPT-2's ``Conv1D`` is transposed first); the bias is left out.

Schemes (docs/methods.md section 10):

- ``per_tensor``: x with one static scale, the corpus-wide max |x| of the site; W per output channel.
- ``per_token``: x with one scale per row (token); W per output channel (W8A8 as in SmoothQuant's
  O3 / ZeroQuant).
- ``keep_k``: LLM.int8()'s decomposition (Dettmers et al. 2022, arXiv 2208.07339): the K input
  channels with the largest corpus max |x| stay in full precision in x and in W's columns; the rest
  is per-token x and per-channel W (scales taken over the remaining channels only).
- ``smoothquant``: Xiao et al. 2023 (arXiv 2211.10438): ``s_j = max|X_j|^α / max|W_j|^(1-α)``
  (both clamped at 1e-5 as in mit-han-lab/smoothquant ``smooth.py``; ``max|W_j|`` over every
  projection fed by the site), ``x' = x / s``, ``W' = W · s``, then per-token x / per-channel W.
- ``rotation``: QuaRot-style (Ashkboos et al. 2024, arXiv 2404.00456): ``x' = x H``, ``W' = W H``
  with an orthonormal block-Hadamard ``H`` (blocks of the largest power of two dividing the width),
  exact in full precision because ``H Hᵀ = I``; then per-token x / per-channel W.
- ``w4_g128``: weight-only int4, symmetric, groups of 128 input channels per output row
  (the last group shorter when the width is not a multiple of 128); x stays in full precision.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from isoscope.analysis.quant.params import KEEP_K, SMOOTHQUANT_ALPHA

SCHEMES = ("per_tensor", "per_token", "keep_k", "smoothquant", "rotation", "w4_g128")
SCHEME_LABELS = {
    "per_tensor": "W8A8 per tensor (static)",
    "per_token": "W8A8 per token",
    "keep_k": "keep-K (LLM.int8)",
    "smoothquant": "SmoothQuant",
    "rotation": "Hadamard rotation",
    "w4_g128": "W4 g128 (weight only)",
}
INT8 = 127
INT4 = 7
EPS = 1e-12
SMOOTH_CLAMP = 1e-5  # smoothquant/smooth.py clamps both scales at 1e-5
GROUP = 128


def _fake(v: torch.Tensor, scale: torch.Tensor, qmax: int) -> torch.Tensor:
    scale = scale.clamp(min=EPS)
    return torch.div(v, scale).round_().clamp_(-qmax, qmax).mul_(scale)  # one new tensor


def quant_per_row(v: torch.Tensor, qmax: int = INT8) -> torch.Tensor:
    """One scale per row (a token of x, or an output channel of W): ``max|row| / qmax``. Rows
    of no columns (keep-k on a site no wider than k keeps every channel) stay as they are."""
    if v.shape[-1] == 0:
        return v.clone()
    return _fake(v, v.abs().amax(dim=-1, keepdim=True) / qmax, qmax)


def quant_per_tensor(v: torch.Tensor, max_abs: float, qmax: int = INT8) -> torch.Tensor:
    """One static scale ``max_abs / qmax`` (the calibration max, not this tensor's)."""
    return _fake(v, torch.tensor(float(max_abs), dtype=v.dtype, device=v.device) / qmax, qmax)


def quant_groups(w: torch.Tensor, group: int = GROUP, qmax: int = INT4) -> torch.Tensor:
    """Per output row, groups of ``group`` input channels, each with its own absmax scale."""
    out = torch.empty_like(w)
    for start in range(0, w.shape[-1], group):
        out[..., start : start + group] = quant_per_row(w[..., start : start + group], qmax)
    return out


def hadamard_block(width: int) -> int:
    """The largest power of two dividing ``width`` (e.g. 576 -> 64, 1536 -> 512)."""
    return width & -width


def hadamard(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The orthonormal Sylvester Hadamard matrix of order ``n`` (a power of two)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"Hadamard order must be a power of two, got {n}")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).to(dtype)


def rotate(v: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """``v H`` along the last axis with H block-diagonal of orthonormal Hadamard blocks."""
    width = v.shape[-1]
    block = block or hadamard_block(width)
    h = hadamard(block, v.dtype).to(v.device)
    return (v.reshape(*v.shape[:-1], width // block, block) @ h).reshape(v.shape)


def smooth_scales(
    act_max: torch.Tensor, w: torch.Tensor, alpha: float = SMOOTHQUANT_ALPHA.default
) -> torch.Tensor:
    """SmoothQuant's per-input-channel ``s_j = max|X_j|^α / max|W_j|^(1-α)``, as in
    mit-han-lab/smoothquant ``smooth_ln_fcs_llama_like`` (``W`` stacks every projection fed by
    the site, so ``max|W_j|`` is over all of them)."""
    w_max = w.abs().amax(dim=0).clamp(min=SMOOTH_CLAMP)
    a = act_max.to(w.dtype).clamp(min=SMOOTH_CLAMP)
    return (a.pow(alpha) / w_max.pow(1 - alpha)).clamp(min=SMOOTH_CLAMP)


def top_channels(act_max: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` input channels with the largest max |x| (sorted by channel index)."""
    k = max(0, min(int(k), act_max.numel()))
    return torch.sort(torch.topk(act_max, k).indices).values


def transforms(
    scheme: str,
    w: torch.Tensor,
    act_max: torch.Tensor,
    *,
    keep: int = KEEP_K.default,
    alpha: float = SMOOTHQUANT_ALPHA.default,
) -> tuple[Callable[[torch.Tensor], torch.Tensor] | None, torch.Tensor]:
    """The scheme as ``(x_fn, W')``: the fake-quantized input ``x' = x_fn(x)`` (None: x unchanged)
    and the fake-quantized weight, such that ``x' W'ᵀ`` is the quantized ``x Wᵀ``.

    ``w`` (out, in) and ``act_max`` (in,) the site's corpus per-channel max |x| (act_scales). This
    one definition serves the per-site error and the end-to-end runs (pre-hook + weight swap).
    """
    if scheme == "per_tensor":
        peak = float(act_max.max()) if act_max.numel() else 0.0
        return (lambda x: quant_per_tensor(x, peak)), quant_per_row(w)
    if scheme == "per_token":
        return quant_per_row, quant_per_row(w)
    if scheme == "keep_k":
        kept = top_channels(act_max, keep).to(w.device)
        rest = torch.ones(w.shape[1], dtype=torch.bool, device=w.device)
        rest[kept] = False
        w_q = w.clone()
        w_q[:, rest] = quant_per_row(w[:, rest])

        def keep_x(x: torch.Tensor) -> torch.Tensor:
            out = x.clone()
            out[..., rest] = quant_per_row(x[..., rest])
            return out

        return keep_x, w_q
    if scheme == "smoothquant":
        s = smooth_scales(act_max.to(w.device), w, alpha)
        return (lambda x: quant_per_row(x / s.to(x.dtype))), quant_per_row(w * s)
    if scheme == "rotation":
        block = hadamard_block(w.shape[1])
        return (lambda x: quant_per_row(rotate(x, block))), quant_per_row(rotate(w, block))
    if scheme == "w4_g128":
        return None, quant_groups(w)
    raise ValueError(f"unknown scheme {scheme!r}; use one of {', '.join(SCHEMES)}")


def relative_error(
    y_q: torch.Tensor, y: torch.Tensor, row_weights: torch.Tensor | None = None
) -> float:
    """``||Y_q - Y||_F / ||Y||_F`` (0 when Y is all zeros and so is Y_q); with ``row_weights``
    (N,), ``sqrt(Σ_i w_i ||ΔY_i||² / Σ_i w_i ||Y_i||²)``, for rows that stand for w_i tokens."""
    num2 = ((y_q - y).double() ** 2).sum(-1)
    den2 = (y.double() ** 2).sum(-1)
    if row_weights is not None:
        w = row_weights.to(num2.device, torch.float64)
        num2, den2 = num2 * w, den2 * w
    num, den = math.sqrt(float(num2.sum())), math.sqrt(float(den2.sum()))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def site_errors(
    x: torch.Tensor,
    w: torch.Tensor,
    act_max: torch.Tensor,
    *,
    keep: int = KEEP_K.default,
    alpha: float = SMOOTHQUANT_ALPHA.default,
    schemes: tuple[str, ...] = SCHEMES,
) -> dict[str, float]:
    """The relative output error of every scheme at one site: ``x`` (N, in) tokens, ``w``
    (out, in) the stacked weights of every projection the site feeds, ``act_max`` (in,)."""
    y = x @ w.T
    errors = {}
    for scheme in schemes:
        x_fn, w_q = transforms(scheme, w, act_max, keep=keep, alpha=alpha)
        errors[scheme] = relative_error((x if x_fn is None else x_fn(x)) @ w_q.T, y)
    return errors
