"""Directions the card reads besides a basis dimension, from an extraction's statistics: the mean
direction of a state (the common direction anisotropy is made of; Ethayarajh 2019) and its
principal components (of the extraction's token sample)."""

from __future__ import annotations

import numpy as np

from isoscope.engine.errors import InputError


def mean_direction(mean: np.ndarray) -> np.ndarray:
    """The unit mean vector of a state, from its (d,) mean."""
    mean = np.asarray(mean, dtype=np.float64)
    norm = float(np.linalg.norm(mean))
    if not norm > 0:
        raise InputError("this state's mean vector is zero: it has no mean direction")
    return mean / norm


def principal_direction(vectors: np.ndarray, k: int) -> np.ndarray:
    """The unit k-th principal component (1-based) of (n, d) token vectors, its sign chosen so that
    the tokens' mean projection is >= 0."""
    x = np.asarray(vectors, dtype=np.float64)
    if k < 1 or k > min(x.shape):
        raise InputError(
            f"principal component {k} does not exist: choose 1 to {min(x.shape)} for "
            f"{x.shape[0]} sampled tokens of width {x.shape[1]}"
        )
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    u = vt[k - 1]
    return -u if float((x @ u).mean()) < 0 else u
