"""The one batching rule of every forward pass over a tokenized corpus: texts longest first, at
most ``batch_size`` texts and ``token_budget`` padded tokens a batch (:func:`plan_batches`), and
the padded tokens those batches run (:func:`padded_tokens`), which the speed estimates count
(:mod:`isoscope.engine.budget.throughput`). numpy only, so the estimates need no model code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isoscope.engine.params import BATCH_SIZE, TOKEN_BUDGET


def length_order(lengths: np.ndarray, tie: np.ndarray | None = None) -> np.ndarray:
    """Texts with tokens, longest first (stable): memory trouble shows at once, padding is small.
    ``tie`` (audio clips' sample counts) orders equal lengths, so equal ``tie`` values are adjacent."""
    if tie is None:
        order = np.argsort(-lengths, kind="stable")
    else:
        order = np.lexsort((-np.asarray(tie), -lengths))
    return order[lengths[order] > 0]


def batch_count(width: int, left: int, batch_size: int, token_budget: int) -> int:
    """Texts in the next batch when its longest text has ``width`` tokens and ``left`` remain:
    at most ``batch_size`` texts and ``token_budget`` padded tokens, at least one."""
    return max(1, min(batch_size, token_budget // max(1, width), left))


def equal_run(group: np.ndarray, order: np.ndarray, start: int, count: int) -> int:
    """How many of ``order[start : start + count]`` share the group of ``order[start]`` (>= 1)."""
    window = group[order[start : start + count]]
    differs = np.flatnonzero(window != window[0])
    return int(differs[0]) if len(differs) else len(window)


def plan_batches(
    lengths: np.ndarray,
    batch_size: int,
    token_budget: int | None = None,
    group: np.ndarray | None = None,
) -> list[np.ndarray]:
    """The batches :func:`extract_partial` forms from these text lengths (before any
    out-of-memory halving, which only changes float rounding): texts with tokens, longest first, at
    most ``batch_size`` texts and ``token_budget`` padded tokens each (``None``: no token budget);
    with ``group`` (clips that must not be padded: their sample counts) one group per batch.
    The one batching rule of every forward pass over a tokenized corpus."""
    order, batches, start = length_order(lengths, group), [], 0
    while start < len(order):
        width = int(lengths[order[start]])
        budget = batch_size * max(1, width) if token_budget is None else token_budget
        count = batch_count(width, len(order) - start, batch_size, budget)
        if group is not None:
            count = equal_run(group, order, start, count)
        batches.append(order[start : start + count])
        start += count
    return batches


@dataclass(frozen=True)
class Batching:
    """How an extraction batches texts (``ExtractionSettings.batch_size`` / ``token_budget``)."""

    batch_size: int
    token_budget: int

    @classmethod
    def of(cls, settings=None) -> Batching:
        """The batching of ``settings`` (None: the defaults)."""
        if settings is None:
            return cls(BATCH_SIZE.default, TOKEN_BUDGET.default)
        return cls(settings.batch_size, settings.token_budget)


def padded_tokens(counts: Sequence[int], batching: Batching) -> int:
    """Tokens the forward passes run over texts of ``counts`` tokens: each batch's texts x its
    longest text, in the batches the extraction forms
    (:func:`plan_batches`)."""
    lengths = np.asarray(counts, dtype=np.int64)
    batches = plan_batches(lengths, batching.batch_size, batching.token_budget)
    return int(sum(len(b) * int(lengths[b].max()) for b in batches))


def work_shares(counts: Sequence[int], batching: Batching) -> list[float]:
    """The extraction's share of padded tokens done once ``k`` texts are (``k`` = 0 .. the
    texts with tokens; item ``k``), in the batches the extraction forms: its progress counts
    texts, longest first, so its first batches are more than their share of the texts."""
    lengths = np.asarray(counts, dtype=np.int64)
    widths: list[int] = []
    for batch in plan_batches(lengths, batching.batch_size, batching.token_budget):
        widths.extend([int(lengths[batch].max())] * len(batch))  # each row padded to the longest
    done = np.concatenate([[0], np.cumsum(widths, dtype=np.float64)])
    return (done / done[-1]).tolist() if done[-1] > 0 else [1.0] * len(done)
