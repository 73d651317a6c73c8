"""What SmoothQuant (at the chosen α) and the Hadamard rotation do to each site, before and after
(docs/methods.md section 10): on the scan's weighted token sample ``x`` (n, in) and the site's
stacked weight ``W`` (out, in), the transform of :mod:`.schemes` (``x / s`` and ``W · s``;
``x H`` and ``W H``) is applied in full precision and both sides are described:

- activations: max |x| / weighted median |x|, kurtosis (``m4 / m2²``, weighted), the share of
  |x| >= 6 (LLM.int8's magnitude), and the relative error of per-token int8;
- weights: the per-input-channel max |W| as max / median over channels (how uneven its columns
  are), and the relative error of per-output-channel int8.

Comparing the two int8 errors after the transform answers "what did smoothing move from the
activations to the weights, and is the weight side now the hard one?" (Xiao et al. 2023, arXiv
2211.10438, section 4; Ashkboos et al. 2024, arXiv 2404.00456)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from isoscope.analysis.quant.params import SMOOTHQUANT_ALPHA
from isoscope.analysis.quant.readiness.scan import QuantScan, weighted_median
from isoscope.analysis.quant.schemes import (
    hadamard_block,
    quant_per_row,
    relative_error,
    rotate,
    smooth_scales,
)
from isoscope.analysis.quant.sites import weight_matrix
from isoscope.engine.device import to_numpy
from isoscope.engine.params import LLM_INT8_THRESHOLD

TRANSFORMS = ("smoothquant", "rotation")


@dataclass(frozen=True)
class SideStats:
    """One side of one site under one transform (or none)."""

    act_max_over_median: float
    act_kurtosis: float
    act_share_ge_6: float
    act_int8_error: float
    weight_column_max_over_median: float
    weight_int8_error: float


def _side(x: torch.Tensor, w: torch.Tensor, row_weights: torch.Tensor) -> SideStats:
    x = x.double()
    values = x.abs()
    per_value = row_weights.double().repeat_interleave(x.shape[1])
    median = weighted_median(values.flatten(), per_value)
    rw = row_weights.double()[:, None]
    total = float(rw.sum()) * x.shape[1]
    mean = float((x * rw).sum()) / total
    c = x - mean
    m2 = float((c * c * rw).sum()) / total
    m4 = float((c**4 * rw).sum()) / total
    share = float(((values >= LLM_INT8_THRESHOLD).double() * rw).sum()) / total
    cols = w.abs().amax(dim=0).double()
    col_median = float(cols.median())
    return SideStats(
        act_max_over_median=float(values.max()) / median if median > 0 else float("inf"),
        act_kurtosis=m4 / (m2 * m2) if m2 > 0 else float("nan"),
        act_share_ge_6=share,
        act_int8_error=relative_error(quant_per_row(x.float()), x.float(), row_weights),
        weight_column_max_over_median=float(cols.max()) / col_median
        if col_median > 0
        else float("inf"),
        weight_int8_error=relative_error(quant_per_row(w), w),
    )


@dataclass(frozen=True)
class ChannelProfile:
    """One site under one transform, per input channel j (arrays (in,), float64): the max |x_j|
    over the scan's token sample and the weight's input-channel range max_i |W_ij| over every
    projection the site feeds, before and after (``x / s``, ``W · s`` or ``x H``, ``W H``)."""

    site: str
    transform: str
    alpha: float
    act_before: np.ndarray
    act_after: np.ndarray
    weight_before: np.ndarray
    weight_after: np.ndarray


def _transformed(
    x: torch.Tensor, w: torch.Tensor, act_max: torch.Tensor, transform: str, alpha: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x', W')`` of ``transform`` in full precision (:mod:`.schemes`' own scales and blocks)."""
    if transform == "smoothquant":
        scale = smooth_scales(act_max.float(), w, alpha)
        return x / scale, w * scale
    if transform == "rotation":
        block = hadamard_block(w.shape[1])
        return rotate(x, block), rotate(w, block)
    raise ValueError(f"unknown transform {transform!r}; use one of {', '.join(TRANSFORMS)}")


def _stacked(named: dict, site_scan) -> tuple[torch.Tensor, torch.Tensor]:
    w = torch.cat([weight_matrix(named[p]).detach().float().cpu() for p in site_scan.site.paths])
    return site_scan.sample.float(), w


def channel_profile(
    loaded,
    scan: QuantScan,
    index: int,
    transform: str = "smoothquant",
    *,
    alpha: float = SMOOTHQUANT_ALPHA.default,
) -> ChannelProfile:
    """Per input channel of ``scan.sites[index]``, activation max |x| and weight range before and
    after ``transform`` (the per-channel view of :func:`before_after`: smoothing divides the
    outlier channels' activations by ``s_j`` and multiplies the weight's column j by it)."""
    s = scan.sites[index]
    x, w = _stacked(dict(loaded.encoder.named_modules()), s)
    with torch.inference_mode():
        x_t, w_t = _transformed(x, w, s.act_max, transform, alpha)

    def col_max(v: torch.Tensor) -> np.ndarray:
        return to_numpy(v.abs().amax(dim=0).double()) if v.numel() else np.zeros(v.shape[1])

    return ChannelProfile(
        s.site.name, transform, float(alpha), col_max(x), col_max(x_t), col_max(w), col_max(w_t)
    )


def before_after(
    loaded, scan: QuantScan, *, alpha: float = SMOOTHQUANT_ALPHA.default
) -> list[dict[str, SideStats]]:
    """Per site of ``scan``: ``{"before", "smoothquant", "rotation"}`` -> :class:`SideStats`."""
    named = dict(loaded.encoder.named_modules())
    out = []
    with torch.inference_mode():
        for s in scan.sites:
            x, w = _stacked(named, s)
            weights = scan.sample_weights
            row = {"before": _side(x, w, weights)}
            for transform in TRANSFORMS:
                row[transform] = _side(*_transformed(x, w, s.act_max, transform, alpha), weights)
            out.append(row)
    return out
