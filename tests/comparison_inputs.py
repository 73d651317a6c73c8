"""Planted inputs of the comparison tests (tests/unit/analysis/compare/): extraction results of
given token vectors, every token in the sample."""

from __future__ import annotations

import numpy as np

from backend.engine.extraction import ExtractionResult, TokenTable
from tests.synthetic import result_from_vectors


def token_result(vectors: np.ndarray, text_id: np.ndarray, sha: str = "c") -> ExtractionResult:
    """An ExtractionResult of token vectors (S, n, d), every token in the sample."""
    n = vectors.shape[1]
    tokens = TokenTable(
        text_id=text_id.astype(np.int32),
        position=np.zeros(n, dtype=np.int32),
        token=np.array([f"t{i}" for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.zeros(n, dtype=bool),
        is_punct=np.zeros(n, dtype=bool),
    )
    return result_from_vectors(vectors, tokens, corpus_sha=sha)


def planted_pair() -> tuple[ExtractionResult, ExtractionResult]:
    """A: isotropic noise in 2 states. B: the same, plus dim 5 shifted to -8 in state 1 (an
    outlier that B gains, which also makes B anisotropic there)."""
    rng = np.random.default_rng(4)
    n, d = 600, 32
    text_id = np.repeat(np.arange(60), 10)
    a = rng.normal(size=(2, n, d))
    b = a.copy()
    b[1, :, 5] -= 8.0
    return token_result(a, text_id), token_result(b, text_id)
