"""Attention sinks: how much attention each head pays to the first token.

Xiao, Tian, Chen, Han & Lewis 2023, "Efficient Streaming Language Models with Attention Sinks"
(arXiv 2309.17453): many heads put most of their attention on the first token, whatever it is.
Metric of Gu et al. 2024, "When Attention Sink Emerges in Language Models: An Empirical View"
(arXiv 2410.10781): for layer l, head h and key position k (1-based),

    alpha_k^{l,h} = 1 / (T - k + 1) * sum_{i >= k} A^{l,h}_{i,k},

the attention to key k averaged over the queries that can see it, and the sink share
Sink_k = the fraction of (layer, head) pairs with alpha_k > 0.3. Here k = 1, the first token
(position 0): every query sees it, so alpha is the mean over all T queries of the text. alpha is
computed per text and averaged over texts (equal weight per text); the threshold is applied to
that average. On a bidirectional encoder the same formula measures attention to [CLS].

Attention weights exist only with transformers' ``eager`` attention (SDPA and flash kernels never
materialise them): :func:`eager_attention` switches a loaded model to eager for one ``with`` block
and restores it, under a lock so concurrent users of a shared cached model never see it switched
back mid-pass (their results would not change: eager computes the same attention, only slower).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from isoscope.engine.arch.qk_capture import ATTENTION_SWITCH
from isoscope.engine.device import to_numpy

SINK_THRESHOLD = 0.3


def sink_alpha(attention: torch.Tensor, lengths: torch.Tensor, key: int = 0) -> torch.Tensor:
    """alpha of Gu et al. for key position ``key`` (0-based) per text and head.

    ``attention``: (B, H, T, T) softmax weights (rows = queries) of right-padded texts;
    ``lengths``: (B,) real lengths. Returns (B, H): the mean over queries ``key <= i < length`` of
    ``A[b, h, i, key]`` (float64). Texts not longer than ``key`` give NaN.
    """
    _, _, t, _ = attention.shape
    queries = torch.arange(t, device=attention.device)
    lengths = lengths.to(attention.device)
    valid = (queries[None, :] >= key) & (queries[None, :] < lengths[:, None])  # (B, T)
    column = attention[..., key].to(torch.float64)  # (B, H, T): attention of every query to key
    total = (column * valid[:, None, :]).sum(dim=-1)  # (B, H)
    count = valid.sum(dim=-1, keepdim=True).to(torch.float64)  # (B, 1)
    return total / count


@dataclass(frozen=True)
class SinkStats:
    """``alpha``: float64 (L', H), attention to the first token averaged over queries and texts,
    one row per softmax-attention layer (``layers``: their numbers, 1..L; every layer when None);
    ``share_per_layer``: (L',) fraction of heads with alpha > ``threshold``; ``share``: overall;
    ``other_layers``: the layers without softmax attention, with their kind ("Mamba-2")."""

    alpha: np.ndarray
    share_per_layer: np.ndarray
    share: float
    threshold: float
    n_texts: int
    layers: tuple[int, ...] | None = None
    other_layers: dict[int, str] = field(default_factory=dict)

    @property
    def layer_numbers(self) -> tuple[int, ...]:
        """The layer (1..L) of each row of ``alpha``."""
        return self.layers or tuple(range(1, self.alpha.shape[0] + 1))

    def to_dict(self) -> dict:
        return {
            "layers": list(self.layer_numbers),
            "alpha": self.alpha.tolist(),
            "share_per_layer": self.share_per_layer.tolist(),
            "share": self.share,
            "no_attention_layers": {str(k): v for k, v in self.other_layers.items()},
        }


def sink_share(alpha: np.ndarray, threshold: float = SINK_THRESHOLD) -> tuple[np.ndarray, float]:
    """Fraction of heads with alpha > ``threshold``: per layer (L,) and over all (layer, head)."""
    above = np.asarray(alpha) > threshold
    return above.mean(axis=1), float(above.mean())


class SinkAccumulator:
    """Sums per-text alpha over batches: ``update(attentions, lengths)``, then :meth:`finish`.

    ``layers``: the layer (1..L) of each attention tensor a batch gives (hybrids return weights
    for their softmax-attention layers only); ``other_layers``: the layers without softmax
    attention and their kind, carried into the result."""

    def __init__(
        self, layers: tuple[int, ...] | None = None, other_layers: dict[int, str] | None = None
    ) -> None:
        self.total: torch.Tensor | None = None  # (L', H) float64 on the model's device
        self.n_texts = 0
        self.layers = layers
        self.other_layers = dict(other_layers or {})

    def update(self, attentions: Sequence[torch.Tensor], lengths: torch.Tensor) -> None:
        """``attentions``: one (B, H, T, T) tensor per attention layer (``output_attentions``)."""
        per_layer = torch.stack([sink_alpha(a, lengths).sum(dim=0) for a in attentions])
        self.total = per_layer if self.total is None else self.total + per_layer
        self.n_texts += int(lengths.shape[0])

    def finish(self, threshold: float = SINK_THRESHOLD) -> SinkStats:
        if self.total is None or self.n_texts == 0:
            raise ValueError("no attention weights were accumulated")
        alpha = to_numpy(self.total) / self.n_texts
        per_layer, share = sink_share(alpha, threshold)
        return SinkStats(
            alpha, per_layer, share, threshold, self.n_texts, self.layers, self.other_layers
        )


def sink_accumulator(num_layers: int, pattern, notes: list[str]) -> SinkAccumulator | None:
    """The sink accumulator for the softmax-attention layers of a layer pattern
    (``isoscope.engine.arch.layer_pattern``; every layer when it is None), or None, with a note,
    when the model has none ("no attention layers: Mamba mixers only")."""
    if pattern is None:
        return SinkAccumulator()
    why = pattern.no_attention_reason()
    if why:
        notes.append(f"attention sinks skipped: {why}")
        return None
    layers = pattern.attention_layers()
    if len(layers) == num_layers:
        return SinkAccumulator()
    return SinkAccumulator(layers, pattern.other_layers())


def attention_weights_of(
    attentions: Sequence[torch.Tensor | None] | None,
    layers: tuple[int, ...],
    num_layers: int,
    width: int,
) -> list[torch.Tensor] | None:
    """The softmax weights (B, H, T, T) of the attention ``layers`` (1..L) among a forward
    pass's ``attentions``: one per attention layer (hybrids), or one per layer (MiniMax returns
    its linear-attention layers' own tensors too, which are left out). None when they cannot be
    matched to the layers or are not (B, H, T, T) weights of this batch."""
    if not attentions:
        return None
    if len(attentions) == len(layers):
        picked = list(attentions)
    elif len(attentions) == num_layers:
        picked = [attentions[i - 1] for i in layers]
    else:
        return None
    for a in picked:
        if a is None or a.ndim != 4 or a.shape[-1] != width or a.shape[-2] != width:
            return None
    return cast(list[torch.Tensor], picked)  # none of them None: checked above


def _attn_implementation(model: torch.nn.Module) -> str | None:
    return getattr(getattr(model, "config", None), "_attn_implementation", None)


@contextmanager
def eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """Switch ``model`` to eager attention for the block (so it returns attention weights), then back.

    Uses ``set_attn_implementation`` (transformers >= 4.48/5.x); models that cannot switch keep
    their implementation, and callers find no attention weights in the output.
    """
    with ATTENTION_SWITCH:
        before = _attn_implementation(model)
        switch = before not in (None, "eager") and hasattr(model, "set_attn_implementation")
        if switch:
            cast(Any, model).set_attn_implementation("eager")
        try:
            yield
        finally:
            if switch and _attn_implementation(model) != before:
                cast(Any, model).set_attn_implementation(before)
