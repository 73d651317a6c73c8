"""LLM.int8()-style outlier features at the inputs of the attention and MLP projections.

Dettmers, Lewis, Belkada & Zettlemoyer 2022, "LLM.int8(): 8-bit Matrix Multiplication for
Transformers at Scale" (arXiv 2208.07339), section 4.1: a feature (hidden dimension) is an outlier
feature when its magnitude is >= 6 in at least 25 % of the layers and at least 6 % of the sequence
positions. They measure it on the inputs of the attention projections and of the FFN expansion,
i.e. the outputs of each layer's norms, and report a phase shift near 6.7B parameters (from ~65 %
to 100 % of layers affected); small models are expected to have none.

Here a *site* is the output of one per-layer norm (``backend.analysis.layernorm.params``: ``L{i}.pre_attn_ln`` and
``L{i}.pre_mlp_ln`` of pre-norm decoders, ``L{i}.attn_ln`` / ``L{i}.out_ln`` of post-LN encoders).
Per site and dim we count the tokens (every non-padding position of the corpus, the first one
included) with ``|x| >= 6``; the dim *counts at the site* when that is >= 6 % of the tokens. Its
``site_share`` is the fraction of sites where it counts; it is an outlier feature when
``site_share >= 0.25``. The counts are taken with forward hooks (``backend.engine.hooks.forward_hooks``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from backend.engine.device import to_numpy

MAGNITUDE = 6.0
TOKEN_SHARE = 0.06
SITE_SHARE = 0.25


@dataclass(frozen=True)
class Int8Stats:
    """``token_share``: float64 (sites, d), fraction of tokens with |x| >= 6 per site and dim;
    ``max_abs``: (sites,) largest |x| at each site; ``site_share``: (d,) fraction of sites where
    the dim counts (token_share >= 6 %); ``outlier_features``: dims with site_share >= 25 %."""

    site_names: tuple[str, ...]
    token_share: np.ndarray
    max_abs: np.ndarray
    site_share: np.ndarray
    outlier_features: tuple[int, ...]
    n_tokens: int

    def ranked_dims(self) -> list[dict]:
        """Dims with a non-zero site share, largest first: ``[{"dim", "site_share"}]``."""
        order = np.argsort(-self.site_share, kind="stable")
        return [
            {"dim": int(j), "site_share": float(self.site_share[j])}
            for j in order
            if self.site_share[j] > 0
        ]

    def verdict(self) -> str:
        """One line: are there LLM.int8-style outlier features, and how close does the model come."""
        n_sites = len(self.site_names)
        if self.outlier_features:
            dims = ", ".join(map(str, self.outlier_features))
            return (
                f"{len(self.outlier_features)} outlier feature(s) (dims {dims}): |x| >= 6 on >= 6 % "
                f"of tokens at >= 25 % of the {n_sites} norm outputs, as in LLM.int8() models >= 6.7B."
            )
        best = int(np.argmax(self.site_share)) if self.site_share.size else 0
        top = float(self.site_share[best]) if self.site_share.size else 0.0
        if top == 0:
            return (
                f"No outlier features: no dim reaches |x| >= 6 on 6 % of tokens at any of the {n_sites} "
                "norm outputs (expected below the ~6.7B-parameter phase shift)."
            )
        return (
            f"No outlier features: the closest, dim {best}, qualifies at {top:.0%} of the {n_sites} norm "
            "outputs (needs 25 %); expected below the ~6.7B-parameter phase shift."
        )

    def to_dict(self) -> dict:
        return {
            "dims": self.ranked_dims(),
            "outlier_features": list(self.outlier_features),
            "sites": list(self.site_names),
            "verdict": self.verdict(),
        }


def int8_from_counts(
    site_names: tuple[str, ...] | list[str],
    counts: np.ndarray,
    max_abs: np.ndarray,
    n_tokens: int,
    *,
    token_share: float = TOKEN_SHARE,
    site_share: float = SITE_SHARE,
) -> Int8Stats:
    """Apply the LLM.int8 rule to per-(site, dim) counts of tokens with |x| >= 6."""
    share = np.asarray(counts, dtype=np.float64) / max(int(n_tokens), 1)  # (sites, d)
    counts_at_site = share >= token_share
    per_dim = counts_at_site.mean(axis=0) if share.shape[0] else np.zeros(share.shape[1])
    outliers = tuple(int(j) for j in np.flatnonzero(per_dim >= site_share))
    return Int8Stats(
        tuple(site_names), share, np.asarray(max_abs, dtype=np.float64), per_dim, outliers, n_tokens
    )


class Int8Accumulator:
    """Counts, per site and dim, the tokens with |x| >= ``magnitude`` (on the model's device).

    :meth:`hook` gives a forward hook for site ``i``; set :attr:`mask` (B, T) bool to the batch's
    non-padding tokens before each forward pass.
    """

    def __init__(self, site_names: list[str], width: int, device: torch.device) -> None:
        self.site_names = list(site_names)
        self.counts = torch.zeros(len(site_names), width, dtype=torch.int64, device=device)
        self.max_abs = torch.zeros(len(site_names), dtype=torch.float64, device=device)
        self.magnitude = MAGNITUDE
        self.mask: torch.Tensor | None = None
        self.n_tokens = 0

    def hook(self, site: int):
        def fn(module: torch.nn.Module, inputs, output) -> None:
            x = output[0] if isinstance(output, tuple) else output  # (B, T, d)
            if self.mask is None:
                return
            values = x[self.mask].abs()  # (N, d), non-padding tokens only
            self.counts[site] += (values >= self.magnitude).sum(dim=0)
            if values.numel():
                self.max_abs[site] = torch.maximum(
                    self.max_abs[site], values.max().to(torch.float64)
                )

        return fn

    def add_tokens(self, n: int) -> None:
        self.n_tokens += int(n)

    def finish(self) -> Int8Stats:
        return int8_from_counts(
            self.site_names, to_numpy(self.counts), to_numpy(self.max_abs), self.n_tokens
        )
