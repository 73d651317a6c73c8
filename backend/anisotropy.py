"""Anisotropy: mean cosine similarity of random pairs of token vectors from different texts.

Ethayarajh 2019 (arXiv 1909.00512); Luo et al. 2021; Godey et al. 2023 (arXiv 2306.07656).
Pairs are drawn with a fixed seed; when fewer different-text pairs exist than asked for, all of
them are used. The same pairs serve every hidden state, so layers are comparable.
"""

from __future__ import annotations

import numpy as np


def different_text_pairs(text_id: np.ndarray, n_pairs: int = 10_000, seed: int = 0) -> np.ndarray:
    """Index pairs (n, 2) of rows whose ``text_id`` differ; all pairs when there are few enough."""
    text_id = np.asarray(text_id)
    n = len(text_id)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    _, per_text = np.unique(text_id, return_counts=True)
    available = (n * n - int((per_text.astype(np.int64) ** 2).sum())) // 2
    if available == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if available <= n_pairs:
        i, j = np.triu_indices(n, k=1)
        keep = text_id[i] != text_id[j]
        return np.stack([i[keep], j[keep]], axis=1)
    rng = np.random.default_rng(seed)
    found = np.zeros((0, 2), dtype=np.int64)
    while len(found) < n_pairs:
        draw = rng.integers(0, n, size=(2 * (n_pairs - len(found)) + 16, 2))
        draw = draw[text_id[draw[:, 0]] != text_id[draw[:, 1]]]
        found = np.concatenate([found, draw])
    return found[:n_pairs]


def pair_cosines(vectors: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Cosine similarity of each index pair, float64 (n_pairs,); zero vectors give 0."""
    x = np.asarray(vectors, dtype=np.float64)
    a, b = x[pairs[:, 0]], x[pairs[:, 1]]
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    return np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)


def anisotropy(
    vectors: np.ndarray, text_id: np.ndarray, n_pairs: int = 10_000, seed: int = 0
) -> float:
    """Mean cosine of random different-text pairs of rows of ``vectors`` (tokens x dims)."""
    pairs = different_text_pairs(text_id, n_pairs, seed)
    if len(pairs) == 0:
        return float("nan")
    return float(pair_cosines(vectors, pairs).mean())


def anisotropy_by_state(result, n_pairs: int = 10_000, seed: int = 0) -> np.ndarray:
    """Anisotropy of every hidden state of an ExtractionResult, on its token sample (S,)."""
    text_id = result.tokens.text_id[result.sample_index]
    pairs = different_text_pairs(text_id, n_pairs, seed)
    if len(pairs) == 0:
        return np.full(result.num_states, np.nan)
    return np.array(
        [pair_cosines(result.sample_vectors[s], pairs).mean() for s in range(result.num_states)]
    )
