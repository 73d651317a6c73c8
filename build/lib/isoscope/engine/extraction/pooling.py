"""Mean pooling of token vectors into text vectors: :func:`masked_mean`, the one implementation.

Pools over every non-padding token, special tokens included, as sentence-transformers' ``Pooling``
module does (mode ``mean_tokens``; Reimers & Gurevych 2019, arXiv 1908.10084), and clamps the
token count at 1e-9 as it does, so an all-padding row gives zeros instead of NaN.
"""

from __future__ import annotations

import torch


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the token axis of ``hidden`` (..., B, T, d) where ``mask`` (B, T) is true/1.

    Leading axes (e.g. the hidden states, S) broadcast: (S, B, T, d) -> (S, B, d). Computed in
    ``hidden``'s dtype (pass float64 for statistics).
    """
    m = mask.to(device=hidden.device, dtype=hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * m).sum(dim=-2) / m.sum(dim=-2).clamp(min=1e-9)
