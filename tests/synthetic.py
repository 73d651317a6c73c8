"""Synthetic :class:`ExtractionResult` objects for unit tests: planted token vectors in, exact
statistics (the real RunningStats) out, every token in the sample. One builder for every test file."""

from __future__ import annotations

import numpy as np

from isoscope.engine.extraction import ExtractionResult, ExtractionSettings, TokenTable
from isoscope.engine.extraction.stats import RunningStats


def result_from_vectors(
    vectors: np.ndarray,
    tokens: TokenTable,
    *,
    texts: tuple[str, ...] | None = None,
    model: dict | None = None,
    corpus_sha: str = "c",
) -> ExtractionResult:
    """An ExtractionResult of token vectors (S, n, d) with ``tokens`` (n rows) as its token table."""
    S, n, d = vectors.shape
    stats = RunningStats(S, d)
    stats.update(vectors)
    if texts is None:
        texts = tuple(f"text {i}" for i in range(int(tokens.text_id.max()) + 1))
    return ExtractionResult(
        model=model or {"source": "synthetic", "display_name": "synthetic"},
        model_fingerprint="fp",
        corpus_name="synthetic",
        corpus_sha=corpus_sha,
        texts=texts,
        notices=(),
        settings=ExtractionSettings(sample_size=n),
        mean=stats.mean,
        variance=stats.variance,
        min=stats.min,
        max=stats.max,
        mean_abs=stats.mean_abs,
        argmin_count=stats.argmin_count,
        argmax_count=stats.argmax_count,
        sample_vectors=vectors.astype(np.float32),
        sample_index=np.arange(n, dtype=np.int64),
        tokens=tokens,
    )
