"""Streaming per-dimension statistics of hidden states, exact and in float64.

Batches are merged with Chan et al.'s parallel update, so the result equals the full-batch
statistics (to float64 rounding) however the corpus is split, and memory stays flat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RunningStats:
    """Accumulates, per hidden state and dimension: count, mean, M2, min, max, mean |x|, and how often
    each dimension holds a token's minimum / maximum (Luo et al.'s extreme-index counts).

    Arrays are shaped (num_states, hidden_size); feed batches shaped (num_states, tokens, hidden_size).
    """

    num_states: int
    hidden_size: int

    def __post_init__(self) -> None:
        shape = (self.num_states, self.hidden_size)
        self.count = 0
        self.mean = np.zeros(shape)
        self.m2 = np.zeros(shape)
        self.abs_sum = np.zeros(shape)
        self.min = np.full(shape, np.inf)
        self.max = np.full(shape, -np.inf)
        self.argmin_count = np.zeros(shape, dtype=np.int64)
        self.argmax_count = np.zeros(shape, dtype=np.int64)

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch of token vectors, shape (num_states, tokens, hidden_size)."""
        if batch.ndim != 3 or batch.shape[0] != self.num_states or batch.shape[2] != self.hidden_size:
            raise ValueError(f"batch shape {batch.shape} != ({self.num_states}, tokens, {self.hidden_size})")
        n_b = batch.shape[1]
        if n_b == 0:
            return
        x = batch.astype(np.float64, copy=False)
        b_mean = x.mean(axis=1)  # (S, d)
        b_m2 = ((x - b_mean[:, None, :]) ** 2).sum(axis=1)
        total = self.count + n_b
        delta = b_mean - self.mean
        self.mean += delta * (n_b / total)
        self.m2 += b_m2 + delta**2 * (self.count * n_b / total)
        self.count = total
        self.abs_sum += np.abs(x).sum(axis=1)
        np.minimum(self.min, x.min(axis=1), out=self.min)
        np.maximum(self.max, x.max(axis=1), out=self.max)
        for s in range(self.num_states):
            self.argmin_count[s] += np.bincount(x[s].argmin(axis=1), minlength=self.hidden_size)
            self.argmax_count[s] += np.bincount(x[s].argmax(axis=1), minlength=self.hidden_size)

    @property
    def variance(self) -> np.ndarray:
        """Population variance (ddof=0), shape (num_states, hidden_size)."""
        return self.m2 / max(self.count, 1)

    @property
    def mean_abs(self) -> np.ndarray:
        return self.abs_sum / max(self.count, 1)
