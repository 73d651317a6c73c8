"""Linear CKA (Kornblith et al. 2019) and the per-state comparison, on synthetic arrays with planted
signals: the feature-space formulas must equal the Gram-matrix definitions (biased HSIC and the
unbiased estimator of Song et al. 2012), and outlier dims planted in B only must show as gained."""

from __future__ import annotations

import numpy as np
import pytest

from backend.analysis.compare.comparison import (
    abs_mean_difference,
    cka_matrix,
    linear_cka,
    same_tokens,
    state_rows,
    summarize,
)
from backend.engine.errors import InputError
from backend.engine.extraction import ExtractionResult, TokenTable
from tests.synthetic import result_from_vectors


def _gram_cka(x: np.ndarray, y: np.ndarray, debiased: bool) -> float:
    """CKA from n x n Gram matrices: HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))."""
    n = len(x)
    k, l_ = x @ x.T, y @ y.T

    def hsic(a: np.ndarray, b: np.ndarray) -> float:
        if not debiased:
            h = np.eye(n) - 1.0 / n
            return float(np.trace(a @ h @ b @ h))
        a, b = a.copy(), b.copy()
        np.fill_diagonal(a, 0.0)
        np.fill_diagonal(b, 0.0)
        one = np.ones(n)
        return float(
            np.trace(a @ b)
            + (one @ a @ one) * (one @ b @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * (one @ a @ b @ one)
        ) / (n * (n - 3))

    return hsic(k, l_) / np.sqrt(hsic(k, k) * hsic(l_, l_))


@pytest.mark.parametrize("debiased", [False, True])
def test_feature_space_cka_equals_the_gram_definition(debiased):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 12)) + 3.0  # a mean offset: the centring must remove it
    y = x[:, :7] @ rng.normal(size=(7, 20)) + 0.5 * rng.normal(size=(60, 20))  # another width
    assert linear_cka(x, y, debiased) == pytest.approx(_gram_cka(x, y, debiased), rel=1e-9)
    xc = x - x.mean(axis=0)
    assert linear_cka(x, y, debiased) == pytest.approx(_gram_cka(xc, y - y.mean(0), debiased))


def test_cka_invariances():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 16)) @ np.diag(np.linspace(0.2, 3.0, 16))
    q, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    assert linear_cka(x, x) == pytest.approx(1.0)
    assert linear_cka(x, 7.5 * x @ q + 4.0) == pytest.approx(1.0)  # rotation, scale, shift
    stretch = x @ np.diag(np.r_[np.full(4, 20.0), np.ones(12)])  # not an isotropic map
    assert linear_cka(x, stretch) < 0.9
    assert linear_cka(x, x, debiased=True) == pytest.approx(1.0)


def test_debiasing_removes_the_small_n_bias_of_independent_data():
    rng = np.random.default_rng(2)
    biased, unbiased = [], []
    for _ in range(20):
        x, y = rng.normal(size=(40, 100)), rng.normal(size=(40, 100))
        biased.append(linear_cka(x, y))
        unbiased.append(linear_cka(x, y, debiased=True))
    assert np.mean(biased) > 0.5  # n < d: plain CKA of unrelated data looks high
    assert abs(np.mean(unbiased)) < 0.05


def test_cka_matrix_shape_and_planted_blocks():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(300, 10))
    xs = [base, rng.normal(size=(300, 10)), base @ rng.normal(size=(10, 4))]
    ys = [base @ np.linalg.qr(rng.normal(size=(10, 10)))[0], rng.normal(size=(300, 30))]
    m = cka_matrix(xs, ys)
    assert m.shape == (3, 2)
    assert m[0, 0] == pytest.approx(1.0)
    assert m[1, 0] < 0.15 and m[0, 1] < 0.15
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            assert m[i, j] == pytest.approx(linear_cka(x, y))


def test_cka_bad_input():
    with pytest.raises(InputError, match="same inputs"):
        cka_matrix([np.ones((5, 2))], [np.ones((6, 2))])
    with pytest.raises(InputError, match="at least 4"):
        linear_cka(np.eye(3), np.eye(3), debiased=True)
    assert np.isnan(linear_cka(np.ones((10, 3)), np.random.default_rng(0).normal(size=(10, 3))))


# ----------------------------------------------------------------------------- per-state rows


def _result(vectors: np.ndarray, text_id: np.ndarray, sha: str = "c") -> ExtractionResult:
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


@pytest.fixture(scope="module")
def planted():
    """A: isotropic noise in 2 states. B: the same, plus dim 5 shifted to -8 in state 1 (an
    outlier that B gains, which also makes B anisotropic there)."""
    rng = np.random.default_rng(4)
    n, d = 600, 32
    text_id = np.repeat(np.arange(60), 10)
    a = rng.normal(size=(2, n, d))
    b = a.copy()
    b[1, :, 5] -= 8.0
    return _result(a, text_id), _result(b, text_id)


def test_state_rows_mark_the_planted_outlier_as_gained(planted):
    ra, rb = planted
    sa, sb = summarize(ra, "A", top_k=1), summarize(rb, "B", top_k=1)
    rows = state_rows(sa, sb)
    assert [r["index"] for r in rows] == [0, 1]
    assert rows[0]["gained"] == [] and rows[0]["lost"] == []
    assert rows[1]["outliers_b"] == [5] and rows[1]["gained"] == [5] and rows[1]["lost"] == []
    assert abs(rows[1]["anisotropy_a"]) < 0.05 < 0.5 < rows[1]["anisotropy_b"]
    assert rows[1]["top_dims_b"] == [5] and rows[1]["top_share_b"] > 0.9
    reverse = state_rows(sb, sa)
    assert reverse[1]["lost"] == [5] and reverse[1]["gained"] == []
    diff = abs_mean_difference(sa, sb)
    assert diff.shape == (2, 32)
    assert np.argmax(diff[1]) == 5 and diff[1, 5] > 7.5
    assert np.abs(np.delete(diff[1], 5)).max() < 1e-9 and np.abs(diff[0]).max() < 1e-9


def test_different_widths_and_depths_leave_dims_uncompared(planted):
    ra, _ = planted
    rng = np.random.default_rng(5)
    other = _result(rng.normal(size=(3, 600, 16)), ra.tokens.text_id)
    sa, so = summarize(ra), summarize(other)
    rows = state_rows(sa, so)
    assert len(rows) == 2  # the states both have
    assert rows[1]["gained"] is None and rows[1]["lost"] is None
    assert abs_mean_difference(sa, so) is None


def test_same_tokens(planted):
    ra, rb = planted
    assert same_tokens(ra, rb)
    other_corpus = _result(np.asarray(rb.sample_vectors, dtype=np.float64), rb.tokens.text_id, "x")
    assert not same_tokens(ra, other_corpus)
    shifted = np.roll(ra.tokens.text_id, 1)
    assert not same_tokens(ra, _result(np.asarray(rb.sample_vectors, np.float64), shifted))


def test_comparison_is_split_into_cka_records_storage_and_orchestration():
    """Linear CKA, the comparison's records and its disk storage live in their own modules; the
    ``comparison`` module orchestrates and re-exports them, so its callers need one import."""
    from backend.analysis.compare import cka, comparison, records, storage

    assert comparison.linear_cka is cka.linear_cka and cka.linear_cka.__module__ == cka.__name__
    assert comparison.Comparison is records.Comparison
    assert comparison.cached_compare is storage.cached_compare
    assert comparison.compare.__module__ == comparison.__name__
    assert all(hasattr(comparison, name) for name in comparison.__all__)
