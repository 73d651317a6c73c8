"""LLM.int8()-style outlier features at the inputs of the attention and MLP projections.

Dettmers, Lewis, Belkada & Zettlemoyer 2022, "LLM.int8(): 8-bit Matrix Multiplication for
Transformers at Scale" (arXiv 2208.07339), section 4.1: a feature (hidden dimension) is an outlier
feature when its magnitude is >= 6 in at least 25 % of the layers and at least 6 % of the sequence
positions. They measure it on the inputs of the attention projections and of the FFN expansion,
i.e. the outputs of each layer's norms, and report a phase shift near 6.7B parameters (from ~65 %
to 100 % of layers affected); small models are expected to have none.

Here a *site* is the output of a norm that is the input of a projection inside a Transformer block
(:func:`isoscope.engine.arch.wiring`: ``L{i}.pre_attn_ln`` and ``L{i}.pre_mlp_ln`` of pre-norm
decoders, ``emb.ln`` / ``L{i}.attn_ln`` / ``L{i}.out_ln`` of post-LN encoders; not Gemma-2/3's or
OLMo-2's post-attention / post-feedforward norms, whose outputs only join the residual stream).
Per site and dim we count the tokens (every non-padding position of the corpus, the first one
included) with ``|x| >= 6``; the dim *counts at the site* when that is >= 6 % of the tokens. Its
``site_share`` is the fraction of sites where it counts; it is an outlier feature when
``site_share >= 0.25``. The counts are taken with forward hooks (``isoscope.engine.arch.hooks.forward_hooks``).

The |x| >= 6 threshold assumes unit-scale norm outputs (OPT's LayerNorm outputs, median |x| near
0.67, the median |z| of a standard normal). Each site's median |x| is measured too (a log
histogram, within 1.2 %); a site whose median is more than :data:`SCALE_FACTOR` times away from
:data:`UNIT_MEDIAN` is flagged, and the verdict says the absolute threshold does not apply there.
Beside the literal rule a scale-free one is shown: |x| >= 6 / 0.6745 (about 8.9) times the site's
own median |x| (the median of the batch at that site), with the same 6 % and 25 % shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from isoscope.analysis.massive.loghist import N_BINS, log_histogram, median_from_histogram
from isoscope.engine.device import to_numpy
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import DETTMERS_2022, LLM_INT8_THRESHOLD, Cited, percent

# A dim counts at a site on >= 6 % of its tokens, and is an outlier feature at >= 25 % of the sites.
TOKEN_SHARE = Cited(0.06, DETTMERS_2022)
SITE_SHARE = Cited(0.25, DETTMERS_2022)
UNIT_MEDIAN = 0.6745  # median |z| of a standard normal: a unit-scale site
SCALE_FACTOR = (
    4.0  # a site's median |x| this many times away from UNIT_MEDIAN: the rule does not apply
)
RELATIVE = (
    LLM_INT8_THRESHOLD / UNIT_MEDIAN
)  # the scale-free rule: |x| >= RELATIVE x the site's median |x|


# The rule in words, formatted from the constants: "on >= 6 % of tokens at >= 25 % of".
TOKENS_AT_SITES = f"on >= {percent(TOKEN_SHARE)} of tokens at >= {percent(SITE_SHARE)} of"


def far_from_unit(median_abs: np.ndarray) -> np.ndarray:
    """Whether each site's median |x| is more than SCALE_FACTOR x away from unit scale."""
    ratio = np.asarray(median_abs, dtype=np.float64) / UNIT_MEDIAN
    return (ratio > SCALE_FACTOR) | (ratio < 1.0 / SCALE_FACTOR)


def _rule(share: np.ndarray, token_share: float, site_share: float):
    counts_at_site = share >= token_share
    per_dim = counts_at_site.mean(axis=0) if share.shape[0] else np.zeros(share.shape[1])
    return per_dim, tuple(int(j) for j in np.flatnonzero(per_dim >= site_share))


def _ranked(site_share: np.ndarray) -> list[dict]:
    order = np.argsort(-site_share, kind="stable")
    return [{"dim": int(j), "site_share": float(site_share[j])} for j in order if site_share[j] > 0]


@dataclass(frozen=True)
class Int8Stats:
    """``token_share``: float64 (sites, d), fraction of tokens with |x| >= 6 per site and dim;
    ``max_abs``: (sites,) largest |x| at each site; ``site_share``: (d,) fraction of sites where
    the dim counts (token_share >= 6 %); ``outlier_features``: dims with site_share >= 25 %.
    ``median_abs`` (sites,) and the scale-free rule's ``relative_site_share`` /
    ``relative_outlier_features`` are None when not measured."""

    site_names: tuple[str, ...]
    token_share: np.ndarray
    max_abs: np.ndarray
    site_share: np.ndarray
    outlier_features: tuple[int, ...]
    n_tokens: int
    median_abs: np.ndarray | None = None
    relative_site_share: np.ndarray | None = None
    relative_outlier_features: tuple[int, ...] | None = None

    @property
    def n_sites(self) -> int:
        return len(self.site_names)

    @property
    def off_scale(self) -> np.ndarray:
        """bool (sites,): the site's median |x| is far from the unit scale |x| >= 6 assumes."""
        if self.median_abs is None:
            return np.zeros(self.n_sites, dtype=bool)
        return far_from_unit(self.median_abs)

    def ranked_dims(self) -> list[dict]:
        """Dims with a non-zero site share, largest first: ``[{"dim", "site_share"}]``."""
        return _ranked(self.site_share)

    def _relative_sentence(self) -> str:
        if self.relative_outlier_features is None:
            return ""
        found = self.relative_outlier_features
        dims = f" (dims {', '.join(map(str, found[:10]))}{', ...' if len(found) > 10 else ''})"
        return (
            f" Scale-free (|x| >= {RELATIVE:.1f} x the site's own median |x|): "
            f"{len(found)} outlier feature(s){dims if found else ''}."
        )

    def verdict(self) -> str:
        """One line: are there LLM.int8-style outlier features, how close does the model come, and
        whether the absolute threshold applies at this model's scale."""
        n_sites = self.n_sites
        off = self.off_scale
        where = f"the {n_sites} projection inputs (norm outputs)"
        if self.outlier_features:
            dims = ", ".join(map(str, self.outlier_features[:10]))
            more = ", ..." if len(self.outlier_features) > 10 else ""
            line = (
                f"{len(self.outlier_features)} outlier feature(s) (dims {dims}{more}): "
                f"|x| >= {LLM_INT8_THRESHOLD:g} {TOKENS_AT_SITES} {where}"
                + (", as in LLM.int8() models >= 6.7B." if not off.any() else ".")
            )
        else:
            best = int(np.argmax(self.site_share)) if self.site_share.size else 0
            top = float(self.site_share[best]) if self.site_share.size else 0.0
            if top == 0:
                line = (
                    f"No outlier features: no dim reaches |x| >= {LLM_INT8_THRESHOLD:g} on "
                    f"{percent(TOKEN_SHARE)} of tokens at any of {where}"
                )
            else:
                line = (
                    f"No outlier features: the closest, dim {best}, qualifies at {top:.0%} of {where} "
                    f"(needs {percent(SITE_SHARE)})"
                )
            line += " (expected below the ~6.7B-parameter phase shift)." if not off.any() else "."
        if off.any():
            assert self.median_abs is not None  # off_scale is all False without it
            worst = float(np.max(self.median_abs[off]))
            line += (
                f" At {int(off.sum())} of {n_sites} sites the median |x| (up to {worst:.3g}) is far "
                f"from the unit scale (~{UNIT_MEDIAN}) the rule assumes, so the absolute "
                f"|x| >= {LLM_INT8_THRESHOLD:g} threshold does not apply there."
            )
        return line + self._relative_sentence()

    def to_dict(self) -> dict:
        per_site = [
            {
                "name": name,
                "median_abs": float(self.median_abs[i]) if self.median_abs is not None else None,
                "max_abs": float(self.max_abs[i]),
                "off_scale": bool(self.off_scale[i]),
            }
            for i, name in enumerate(self.site_names)
        ]
        out = {
            "dims": self.ranked_dims(),
            "outlier_features": list(self.outlier_features),
            "sites": list(self.site_names),
            "n_sites": self.n_sites,
            "per_site": per_site,
            "verdict": self.verdict(),
        }
        if self.relative_site_share is not None:
            out["scale_free"] = {
                "rule": f"|x| >= {RELATIVE:.4g} x the site's median |x| {TOKENS_AT_SITES} the sites",
                "dims": _ranked(self.relative_site_share),
                "outlier_features": list(self.relative_outlier_features or ()),
            }
        return out


def int8_from_counts(
    site_names: tuple[str, ...] | list[str],
    counts: np.ndarray,
    max_abs: np.ndarray,
    n_tokens: int,
    *,
    token_share: float = TOKEN_SHARE,
    site_share: float = SITE_SHARE,
    median_abs: np.ndarray | None = None,
    relative_counts: np.ndarray | None = None,
) -> Int8Stats:
    """Apply the LLM.int8 rule to per-(site, dim) counts of tokens with |x| >= 6 (and, given
    ``relative_counts``, the scale-free rule to counts of |x| >= RELATIVE x the site's median)."""
    n = max(int(n_tokens), 1)
    share = np.asarray(counts, dtype=np.float64) / n  # (sites, d)
    per_dim, outliers = _rule(share, token_share, site_share)
    rel_share = rel_outliers = None
    if relative_counts is not None:
        rel = np.asarray(relative_counts, dtype=np.float64) / n
        rel_share, rel_outliers = _rule(rel, token_share, site_share)
    return Int8Stats(
        tuple(site_names),
        share,
        np.asarray(max_abs, dtype=np.float64),
        per_dim,
        outliers,
        n_tokens,
        None if median_abs is None else np.asarray(median_abs, dtype=np.float64),
        rel_share,
        rel_outliers,
    )


def batch_first(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A block's (B, T', d) activation at the batch's (B, T) tokens: a sequence-first one
    (T, B, d: FSMT, XLNet) transposed, one the model padded itself to its attention block
    (LED, Reformer: T' > T, pads after the last token) cut to T."""
    b, t = mask.shape
    if x.ndim == 3 and b != t and tuple(x.shape[:2]) == (t, b):
        return x.transpose(0, 1)
    if x.ndim >= 3 and x.shape[0] == b and x.shape[1] > t:
        return x[:, :t]
    return x


class Int8Accumulator:
    """Counts, per site and dim, the tokens with |x| >= ``magnitude`` and with |x| >= RELATIVE x the
    batch's median |x| at the site, and a log-|x| histogram per site (on the model's device).

    :meth:`hook` gives a forward hook for site ``i``; set :attr:`mask` (B, T) bool to the batch's
    non-padding tokens before each forward pass.
    """

    def __init__(self, site_names: list[str], width: int, device: torch.device) -> None:
        self.site_names = list(site_names)
        n = len(site_names)
        self.counts = torch.zeros(n, width, dtype=torch.int64, device=device)
        self.relative_counts = torch.zeros(n, width, dtype=torch.int64, device=device)
        self.hist = torch.zeros(n, N_BINS, dtype=torch.int64, device=device)
        self.max_abs = torch.zeros(n, dtype=torch.float64, device=device)
        self.magnitude = LLM_INT8_THRESHOLD
        self.mask: torch.Tensor | None = None
        self.n_tokens = 0

    def hook(self, site: int):
        def fn(module: torch.nn.Module, inputs, output) -> None:
            x = output[0] if isinstance(output, tuple) else output  # (B, T, d)
            if self.mask is None:
                return
            if x.ndim == 2 and x.shape[0] == self.mask.numel():  # OPT's MLP runs on (B*T, d)
                x = x.reshape(*self.mask.shape, x.shape[-1])
            x = batch_first(x, self.mask)
            values = x[self.mask].abs()  # (N, d), non-padding tokens only
            self.counts[site] += (values >= self.magnitude).sum(dim=0)
            if values.numel():
                self.max_abs[site] = torch.maximum(
                    self.max_abs[site], values.max().to(torch.float64)
                )
                self.hist[site] += log_histogram(values)
                median = values.float().flatten().median()
                self.relative_counts[site] += (values.float() >= RELATIVE * median).sum(dim=0)

        return fn

    def add_tokens(self, n: int) -> None:
        self.n_tokens += int(n)

    def finish(self) -> Int8Stats:
        return int8_from_counts(
            self.site_names,
            to_numpy(self.counts),
            to_numpy(self.max_abs),
            self.n_tokens,
            median_abs=median_from_histogram(to_numpy(self.hist, dtype=None)),
            relative_counts=to_numpy(self.relative_counts),
        )


def int8_sites(loaded: LoadedModel) -> list:
    """The norms (``isoscope.analysis.layernorm.params``) whose outputs are the inputs of projections
    inside the Transformer blocks (the traced wiring of :func:`isoscope.engine.arch.wiring`): exactly
    LLM.int8's measurement points. Gemma-2/3's post-attention / post-feedforward norms, whose
    outputs only join the residual stream, are not sites."""
    from isoscope.analysis.layernorm.params import find_norms

    sites = find_norms(
        loaded.model,
        num_layers=loaded.info.num_layers,
        width=loaded.info.hidden_size,
        parametric=False,
    )
    return [site for site in sites if site.feeds_projections]
