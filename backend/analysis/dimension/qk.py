"""The share of each head's query-key logit that the dimension (or direction) carries (Bondarenko
et al. 2023, arXiv 2306.12929: heads that "do nothing" attend to the tokens where an outlier
dimension is huge).

Read at the query and key projections, before rotary positions and any q / k norm: for a sampled
pair of a query token i and a key token j of the same text (j <= i for a causal model, any j of
the text otherwise; one pair per token, drawn with a seeded generator), head h's logit is
q_i^h . k_j^h with q = W_q x_i + b_q and k = W_k x_j + b_k. The part that u carries is that logit
minus the one with u's component removed from both inputs; the share is mean |part| over mean
|logit|, per head. Grouped-query heads use their key head. The pairs come from the card's own
forward pass (a hook on each query projection), at the cost of four small projections of the
batch's tokens per layer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from isoscope.engine.arch import architecture
from isoscope.engine.arch.norms import first_tensor
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import UnsupportedModelError


@dataclass(frozen=True)
class QKReader:
    """One attention layer's separate query and key projections (``layer`` 1..L)."""

    layer: int
    query: torch.nn.Module
    key: torch.nn.Module
    heads: int
    kv_heads: int
    head_dim: int


def qk_readers(loaded, width: int) -> list[QKReader]:
    """The layers whose queries and keys come from separate projections of the stream (the
    family table's ``query`` / ``key``); none where the table has no entry or a fused one."""
    try:
        arch = architecture(loaded)
    except UnsupportedModelError:
        return []
    found = []
    heads, kv_heads, head_dim = arch.num_heads, arch.num_kv_heads, arch.head_dim
    if not heads or not kv_heads or heads % kv_heads:
        return []
    for layer in arch.layers:
        q, k = layer.query, layer.key
        if q is None or k is None:
            continue
        wq, wk = getattr(q, "weight", None), getattr(k, "weight", None)
        if not (isinstance(wq, torch.Tensor) and isinstance(wk, torch.Tensor)):
            continue
        if wq.ndim != 2 or wq.shape != (heads * head_dim, width):
            continue
        if wk.ndim != 2 or wk.shape != (kv_heads * head_dim, width):
            continue
        found.append(QKReader(layer.index + 1, q, k, heads, kv_heads, head_dim))
    return found


class QKShare:
    """Accumulates |part| and |logit| per layer and head over the pass (:meth:`hooks`, then
    :meth:`rows`). ``mask`` is set to the batch's (B, T) real-token mask before each forward."""

    def __init__(self, readers: list[QKReader], u: np.ndarray, causal: bool, seed: int) -> None:
        self.readers = readers
        self.unit = u / np.linalg.norm(u)
        self.causal = causal
        self.seed = seed
        self.mask: torch.Tensor | None = None
        self.part: dict[int, torch.Tensor] = {}
        self.total: dict[int, torch.Tensor] = {}
        self._generator: torch.Generator | None = None

    def hooks(self) -> dict:
        """Forward pre-hooks (with kwargs) on every query projection."""
        return {r.query: self._hook(r) for r in self.readers}

    def _pairs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(query rows, key rows), (N, d) each: one random key token per real query token."""
        mask = self.mask
        assert mask is not None  # set before each forward
        if self._generator is None or self._generator.device != x.device:
            self._generator = torch.Generator(device=x.device).manual_seed(self.seed)
        batch, width = mask.shape
        position = torch.arange(width, device=x.device).expand(batch, width)
        span = position + 1 if self.causal else mask.sum(1, keepdim=True).expand(batch, width)
        draw = torch.rand(batch, width, generator=self._generator, device=x.device)
        keys = (draw * span).long().clamp(max=width - 1)
        rows = torch.arange(batch, device=x.device)[:, None].expand(batch, width)
        return x[mask], x[rows[mask], keys[mask]]

    def _hook(self, reader: QKReader):
        def hook(module, args, kwargs):
            x = first_tensor(args, kwargs)
            if x is None or self.mask is None or x.shape[:2] != self.mask.shape:
                return
            xi, xj = self._pairs(x)
            u = torch.as_tensor(self.unit, dtype=xi.dtype, device=xi.device)

            def without(rows: torch.Tensor) -> torch.Tensor:
                return rows - (rows @ u)[:, None] * u[None]

            repeat = reader.heads // reader.kv_heads
            shape_q = (len(xi), reader.heads, reader.head_dim)
            shape_k = (len(xj), reader.kv_heads, reader.head_dim)

            def logits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
                q = reader.query.forward(a).float().reshape(shape_q)
                k = reader.key.forward(b).float().reshape(shape_k).repeat_interleave(repeat, dim=1)
                return (q * k).sum(-1)  # (N, H)

            full = logits(xi, xj)
            part = full - logits(without(xi), without(xj))
            layer = reader.layer
            self.part[layer] = self.part.get(layer, 0) + part.abs().sum(0)
            self.total[layer] = self.total.get(layer, 0) + full.abs().sum(0)

        return hook

    def rows(self) -> list[dict]:
        """One row per layer and head: ``layer`` (1..L), ``head``, ``share`` (None without pairs)."""
        out = []
        for layer in sorted(self.part):
            part = to_numpy(self.part[layer])
            total = to_numpy(self.total[layer])
            for head, (p, t) in enumerate(zip(part, total, strict=True)):
                out.append({"layer": layer, "head": head, "share": float(p / t) if t > 0 else None})
        return out
