"""Post-processing transformers: planted properties, function twins, registry, sklearn's checks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from isoscope.analysis.projections.postprocess import (
    POSTPROCESSORS,
    AllButTheTop,
    ClipDims,
    Identity,
    MeanCenter,
    Standardize,
    Whiten,
    all_but_the_top,
    clip_dims,
    make_postprocessor,
    mean_center,
    parse_dims,
    standardize,
    whiten,
)
from isoscope.engine.errors import InputError


@pytest.fixture(scope="module")
def anisotropic() -> np.ndarray:
    """2,000 x 40 vectors with a big mean offset, unequal scales and correlated columns."""
    rng = np.random.default_rng(0)
    mixing = rng.normal(size=(40, 40))
    X = rng.normal(size=(2000, 40)) @ mixing * np.linspace(0.5, 5.0, 40)
    X[:, 7] += 30.0  # a rogue dimension
    return X


@parametrize_with_checks(
    [
        Identity(),
        ClipDims(),
        ClipDims(dims=(0,)),
        MeanCenter(),
        Standardize(),
        AllButTheTop(),
        AllButTheTop(n_components=2),
        Whiten(),
        Whiten(n_components=1),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_clip_zeroes_exactly_the_chosen_dims(anisotropic):
    out = clip_dims(anisotropic, [7, 3, 7])
    assert np.all(out[:, [3, 7]] == 0)
    keep = np.setdiff1d(np.arange(40), [3, 7])
    np.testing.assert_array_equal(out[:, keep], anisotropic[:, keep])
    assert np.any(anisotropic[:, [3, 7]] != 0)  # the input was not modified
    assert ClipDims([7, 3, 7]).fit(anisotropic).dims_.tolist() == [3, 7]


def test_clip_rejects_out_of_range_dims(anisotropic):
    with pytest.raises(InputError, match="0 to 39"):
        ClipDims(dims=[40]).fit(anisotropic)


def test_mean_center_gives_zero_mean(anisotropic):
    out = mean_center(anisotropic)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(out - anisotropic, np.broadcast_to(-anisotropic.mean(0), out.shape))


def test_standardize_gives_unit_variance_and_survives_constant_dims(anisotropic):
    X = anisotropic.copy()
    X[:, 5] = 3.0  # zero variance
    out = standardize(X)
    assert np.all(np.isfinite(out))
    var = out.var(axis=0)
    np.testing.assert_allclose(np.delete(var, 5), 1.0, rtol=1e-10)
    np.testing.assert_allclose(out[:, 5], 0.0)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-10)


def test_all_but_the_top_removes_the_top_components(anisotropic):
    est = AllButTheTop(n_components=3).fit(anisotropic)
    out = est.transform(anisotropic)
    centered = anisotropic - anisotropic.mean(0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    top = vt[:3]
    # what is left has (numerically) no projection on the top 3 principal components ...
    assert np.abs(out @ top.T).max() < 1e-8 * np.abs(centered @ top.T).max()
    # ... while the 4th and later components are untouched
    np.testing.assert_allclose(out @ vt[3:].T, centered @ vt[3:].T, atol=1e-8)
    # the default D is max(1, round(d/100)): 1 for d = 40
    assert AllButTheTop().fit(anisotropic).n_components_ == 1
    assert all_but_the_top(anisotropic, 3).shape == anisotropic.shape


def test_whitening_gives_identity_covariance(anisotropic):
    out = whiten(anisotropic)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(40), atol=1e-8)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-8)


def test_whitening_truncated_keeps_the_top_k_directions(anisotropic):
    est = Whiten(n_components=5).fit(anisotropic)
    out = est.transform(anisotropic)
    assert out.shape == (2000, 5)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(5), atol=1e-8)
    variances = np.linalg.eigvalsh(np.cov(anisotropic, rowvar=False))[::-1]
    np.testing.assert_allclose(est.explained_variance_, variances[:5], rtol=1e-8)
    assert est.get_feature_names_out().tolist() == [f"whiten{i}" for i in range(5)]


def test_whitening_drops_null_directions_instead_of_dividing_by_zero():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3)) @ rng.normal(size=(3, 6))  # rank 3 in 6-D
    out = whiten(X)
    assert np.all(np.isfinite(out))
    cov = np.cov(out, rowvar=False)
    np.testing.assert_allclose(np.diag(cov)[:3], 1.0, atol=1e-6)
    np.testing.assert_allclose(cov[3:, 3:], 0.0, atol=1e-6)


def test_transform_applies_the_fitted_statistics_to_new_vectors(anisotropic):
    est = Standardize().fit(anisotropic[:1000])
    new = anisotropic[1000:]
    np.testing.assert_allclose(
        est.transform(new), (new - anisotropic[:1000].mean(0)) / anisotropic[:1000].std(0)
    )


def test_bad_parameters_are_input_errors(anisotropic):
    with pytest.raises(InputError, match="n_components"):
        AllButTheTop(n_components=41).fit(anisotropic)
    with pytest.raises(InputError, match="n_components"):
        Whiten(n_components=0).fit(anisotropic)
    with pytest.raises(InputError, match="2 samples"):
        Whiten().fit(anisotropic[:1])


def test_registry_builds_every_estimator(anisotropic):
    assert list(POSTPROCESSORS) == ["none", "clip", "center", "standardize", "abtt", "whiten"]
    np.testing.assert_array_equal(
        make_postprocessor("none").fit_transform(anisotropic), anisotropic
    )
    assert make_postprocessor("clip", dims=[7]).fit(anisotropic).dims_.tolist() == [7]
    assert make_postprocessor("abtt", n_components=2).fit(anisotropic).n_components_ == 2
    assert make_postprocessor("abtt", n_components=None).fit(anisotropic).n_components_ == 1
    assert make_postprocessor("whiten", n_components=4).fit_transform(anisotropic).shape == (
        2000,
        4,
    )
    assert isinstance(make_postprocessor(" Standardize "), Standardize)


def test_registry_errors_list_the_valid_choices():
    with pytest.raises(InputError, match="none, clip, center, standardize, abtt, whiten"):
        make_postprocessor("pca")
    with pytest.raises(InputError, match="takes dims"):
        make_postprocessor("clip", n_components=3)


def test_parse_dims():
    assert parse_dims("588, 308 308") == [308, 588]
    assert parse_dims("") == []
    with pytest.raises(InputError, match="not an integer"):
        parse_dims("3,x")
    with pytest.raises(InputError, match="out of range; this model has dims 0 to 383"):
        parse_dims("384", hidden_size=384)
