"""Planted inputs of the report tests (tests/unit/share/report/): a synthetic extraction result whose
state 2 has dim 7 shifted to -6, and results of given vectors."""

from __future__ import annotations

import numpy as np

from isoscope.engine.extraction import ExtractionResult, TokenTable
from tests.synthetic import result_from_vectors

QUICK = ("outliers", "anisotropy")


def report_result(vectors: np.ndarray, text_id: np.ndarray) -> ExtractionResult:
    """An ExtractionResult of token vectors (S, n, d), every token in the sample."""
    n = vectors.shape[1]
    tokens = TokenTable(
        text_id=text_id.astype(np.int32),
        position=np.tile(np.arange(10, dtype=np.int32), n // 10),
        token=np.array([f"t{i % 37}" for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.zeros(n, dtype=bool),
        is_punct=np.zeros(n, dtype=bool),
    )
    return result_from_vectors(
        vectors,
        tokens,
        model={"source": "synthetic", "display_name": "synthetic", "architecture": "Synth"},
    )


def planted_result() -> ExtractionResult:
    """3 hidden states of isotropic noise; dim 7 shifted to -6 at state 2 (holds every token's min)."""
    rng = np.random.default_rng(0)
    n, d = 600, 32
    vectors = rng.normal(size=(3, n, d))
    vectors[2, :, 7] -= 6.0
    return report_result(vectors, np.repeat(np.arange(60), 10))
