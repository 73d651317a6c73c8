"""Planted inputs and checks of the comparison tests (tests/*/analysis/compare/): extraction
results of given token vectors (every token in the sample), and "two comparisons are the same"."""

from __future__ import annotations

import json

import numpy as np

from isoscope.engine.extraction import ExtractionResult, TokenTable
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


def assert_same_comparison(got, ref):
    """Every field of two comparisons, and their JSON reports, are equal."""
    assert json.dumps(got.states) == json.dumps(ref.states) and got.notes == ref.notes
    for side_got, side_ref in ((got.a, ref.a), (got.b, ref.b)):
        for f in ("label", "model", "corpus_name", "state_names", "outliers", "top_k", "top_dims"):
            assert getattr(side_got, f) == getattr(side_ref, f), f
        for f in ("anisotropy", "isoscore", "mean", "top_share"):
            np.testing.assert_array_equal(getattr(side_got, f), getattr(side_ref, f))
    for f in ("abs_mean_diff", "sts_a", "sts_b"):
        if getattr(ref, f) is None:
            assert getattr(got, f) is None, f
        else:
            np.testing.assert_array_equal(getattr(got, f), getattr(ref, f))
    assert (got.cka is None) == (ref.cka is None) and (got.ln is None) == (ref.ln is None)
    if ref.cka is not None:
        np.testing.assert_array_equal(got.cka.matrix, ref.cka.matrix)
        assert (got.cka.basis, got.cka.n, got.cka.debiased, got.cka.note) == (
            ref.cka.basis,
            ref.cka.n,
            ref.cka.debiased,
            ref.cka.note,
        )
    if ref.ln is not None:
        assert got.ln.names == ref.ln.names
        np.testing.assert_array_equal(got.ln.d_gamma, ref.ln.d_gamma)
        np.testing.assert_array_equal(got.ln.d_beta, ref.ln.d_beta)
    from isoscope.analysis.compare.comparison import comparison_report
    from isoscope.engine.jsonio import to_jsonable

    def as_json(c):
        return json.dumps(to_jsonable(comparison_report(c)), sort_keys=True)

    assert as_json(got) == as_json(ref)
