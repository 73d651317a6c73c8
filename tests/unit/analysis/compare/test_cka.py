"""Linear CKA (Kornblith et al. 2019) on synthetic arrays with planted signals: the feature-space
formulas must equal the Gram-matrix definitions (biased HSIC and the unbiased estimator of Song et
al. 2012); and which extractions share their sampled tokens."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.compare.cka import (
    cka_matrix,
    linear_cka,
    same_tokens,
)
from isoscope.engine.errors import InputError
from tests.comparison_inputs import planted_pair, token_result


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


_result = token_result


@pytest.fixture(scope="module")
def planted():
    """Two results of the same tokens (B has dim 5 shifted in state 1)."""
    return planted_pair()


def test_same_tokens(planted):
    ra, rb = planted
    assert same_tokens(ra, rb)
    other_corpus = _result(np.asarray(rb.sample_vectors, dtype=np.float64), rb.tokens.text_id, "x")
    assert not same_tokens(ra, other_corpus)
    shifted = np.roll(ra.tokens.text_id, 1)
    assert not same_tokens(ra, _result(np.asarray(rb.sample_vectors, np.float64), shifted))
