"""What SmoothQuant (at the chosen α) and the Hadamard rotation do to each site, before and after
(issue 34; METHODS.md section 10): on the scan's weighted token sample ``x`` (n, in) and the site's
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

import torch

from backend.analysis.quant.readiness.scan import MAGNITUDE, QuantScan, weighted_median
from backend.analysis.quant.schemes import (
    DEFAULT_ALPHA,
    hadamard_block,
    quant_per_row,
    relative_error,
    rotate,
    smooth_scales,
)
from backend.analysis.quant.sites import weight_matrix

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
    share = float(((values >= MAGNITUDE).double() * rw).sum()) / total
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


def before_after(
    loaded, scan: QuantScan, *, alpha: float = DEFAULT_ALPHA
) -> list[dict[str, SideStats]]:
    """Per site of ``scan``: ``{"before", "smoothquant", "rotation"}`` -> :class:`SideStats`."""
    named = dict(loaded.encoder.named_modules())
    out = []
    with torch.inference_mode():
        for s in scan.sites:
            w = torch.cat([weight_matrix(named[p]).detach().float().cpu() for p in s.site.paths])
            x = s.sample.float()
            weights = scan.sample_weights
            scale = smooth_scales(s.act_max.float(), w, alpha)
            block = hadamard_block(w.shape[1])
            out.append(
                {
                    "before": _side(x, w, weights),
                    "smoothquant": _side(x / scale, w * scale, weights),
                    "rotation": _side(rotate(x, block), rotate(w, block), weights),
                }
            )
    return out
