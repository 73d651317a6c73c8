"""A log10 |x| histogram with 200 bins per decade over [1e-6, 1e5], kept on the model's device, and
the median read off it (massive activations, int8 site scales)."""

from __future__ import annotations

import numpy as np
import torch

LOG_LO, LOG_HI, BINS_PER_DECADE = -6.0, 5.0, 200
N_BINS = int((LOG_HI - LOG_LO) * BINS_PER_DECADE)


def log_histogram(magnitude: torch.Tensor) -> torch.Tensor:
    """int64 (N_BINS,) counts of log10 |x| (values clamped into range, so nothing falls outside)."""
    logs = magnitude.float().clamp(10.0**LOG_LO, 10.0 ** (LOG_HI - 1e-3)).log10_()
    return torch.histc(logs, N_BINS, LOG_LO, LOG_HI).to(torch.int64)


def median_from_histogram(hist: np.ndarray) -> np.ndarray:
    """Median of each row's log10-|x| histogram (S, N_BINS), log-linear inside the median bin."""
    hist = np.atleast_2d(hist)
    total = hist.sum(axis=1)
    cum = np.cumsum(hist, axis=1)
    half = total / 2.0
    idx = np.argmax(cum >= half[:, None], axis=1)
    below = np.where(idx > 0, cum[np.arange(len(idx)), idx - 1], 0)
    inside = hist[np.arange(len(idx)), idx]
    frac = np.where(inside > 0, (half - below) / np.maximum(inside, 1), 0.5)
    log_value = LOG_LO + (idx + frac) / BINS_PER_DECADE
    return np.where(total > 0, 10.0**log_value, np.nan)


def median_bin(hist: np.ndarray) -> np.ndarray:
    """Index of the bin holding each row's median (S,)."""
    hist = np.atleast_2d(hist)
    cum = np.cumsum(hist, axis=1)
    return np.argmax(cum >= (hist.sum(axis=1) / 2.0)[:, None], axis=1)


def bin_edge(index: np.ndarray | int) -> np.ndarray:
    """Lower edge (as |x|) of bin ``index``."""
    return 10.0 ** (LOG_LO + np.asarray(index, dtype=np.float64) / BINS_PER_DECADE)
