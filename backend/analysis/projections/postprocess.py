"""Post-processing of embedding vectors ("clipping" and friends) as scikit-learn transformers.

Every transformer is fitted on a sample of vectors (tokens x dims) and can then transform any
vectors of the same width; each has a plain-function twin that fits and transforms in one call
(like ``StandardScaler`` / ``scale``). Statistics are computed in float64 and the output is float64.

- :class:`ClipDims` / :func:`clip_dims`: set chosen dimensions to 0 (Luo, Kulmizev & Mao 2021,
  *Positional Artefacts Propagate Through Masked Language Model Embeddings*, arXiv 2011.04393).
- :class:`MeanCenter` / :func:`mean_center`: subtract the mean vector.
- :class:`Standardize` / :func:`standardize`: z-score every dimension (Timkey & van Schijndel 2021,
  *All Bark and No Bite*, arXiv 2109.04404, find it the most effective fix for rogue dimensions).
- :class:`AllButTheTop` / :func:`all_but_the_top`: subtract the mean, then remove the projections
  on the top D principal components, D ~ d/100 (Mu & Viswanath 2018, *All-but-the-Top*,
  arXiv 1702.01417).
- :class:`Whiten` / :func:`whiten`: y = (x - mu) W with W = U diag(1/sqrt(s)) from the SVD of the
  covariance, optionally keeping the first k columns (Su et al. 2021, *Whitening Sentence
  Representations*, arXiv 2103.15316).

:data:`POSTPROCESSORS` names them for the pages and CLIs; :func:`make_postprocessor` builds one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    OneToOneFeatureMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_is_fitted, validate_data

from isoscope.engine.errors import InputError


class PostprocessError(InputError, ValueError):
    """A post-processing parameter that does not fit the data (also a ValueError, as sklearn expects)."""


def _top_eigen(centered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns) of ``centered.T @ centered``, float64.

    The d x d eigendecomposition is cheaper than an SVD of the n x d data when n >> d and gives the
    same principal directions (the covariance is symmetric PSD, so its SVD is its eigendecomposition).
    """
    gram = centered.T @ centered
    values, vectors = np.linalg.eigh(gram)
    order = np.argsort(values)[::-1]
    return np.clip(values[order], 0.0, None), vectors[:, order]


# ----------------------------------------------------------------------------- transformers


class Identity(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """No post-processing ("none"): returns the vectors unchanged (as float64)."""

    def fit(self, X, y=None):
        validate_data(self, X, dtype=np.float64)
        self.is_fitted_ = True
        return self

    def transform(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, reset=False, copy=True)


class ClipDims(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Zero the chosen dimensions; the model's weights are untouched (Luo et al. 2021, arXiv 2011.04393).

    ``dims`` are column indices, typed in or taken from an outlier detector
    (:func:`isoscope.analysis.outliers.outlier_dims`). Fitting only checks them against the width.
    """

    def __init__(self, dims: Sequence[int] = ()):
        self.dims = dims

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64)
        dims = np.asarray(list(self.dims), dtype=np.int64).reshape(-1)
        bad = dims[(dims < 0) | (dims >= X.shape[1])]
        if len(bad):
            raise PostprocessError(
                f"cannot clip dimension(s) {bad.tolist()}: the vectors have {X.shape[1]} dimensions "
                f"(0 to {X.shape[1] - 1}); give dims in that range"
            )
        self.dims_ = np.unique(dims)
        return self

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False, copy=True)
        X[:, self.dims_] = 0.0
        return X


class MeanCenter(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Subtract the mean vector of the fitted sample (the first step of Mu & Viswanath 2018)."""

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64)
        self.mean_ = X.mean(axis=0)
        return self

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X - self.mean_


class Standardize(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Z-score every dimension: (x - mean) / std (population std, ddof=0).

    Timkey & van Schijndel 2021 (arXiv 2109.04404) find standardisation the best post-processing
    against rogue dimensions. Dimensions with zero variance are only centred (scale 1), never divided by 0.
    """

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64)
        self.mean_ = X.mean(axis=0)
        scale = X.std(axis=0)
        # A constant column's float std is rounding noise (~1e-16 |x|), not a spread to divide by.
        tiny = scale <= 1e-12 * np.maximum(np.abs(self.mean_), 1.0)
        self.scale_ = np.where(tiny, 1.0, scale)
        return self

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return (X - self.mean_) / self.scale_


class AllButTheTop(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Subtract the mean and remove the projections on the top D principal components.

    Mu & Viswanath 2018, *All-but-the-Top: Simple and Effective Postprocessing for Word
    Representations* (arXiv 1702.01417): D ~ d/100. ``n_components=None`` uses max(1, round(d/100));
    0 only centres. ``components_`` holds the removed directions as rows (D, d).
    """

    def __init__(self, n_components: int | None = None):
        self.n_components = n_components

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64)
        d = X.shape[1]
        k = max(1, round(d / 100)) if self.n_components is None else self.n_components
        if not isinstance(k, int | np.integer) or not 0 <= k <= d:
            raise PostprocessError(
                f"all-but-the-top needs 0 <= n_components <= {d} (the width), got {k!r}"
            )
        self.mean_ = X.mean(axis=0)
        _, vectors = _top_eigen(X - self.mean_)
        self.n_components_ = int(k)
        self.components_ = vectors[:, : self.n_components_].T.copy()
        return self

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        centered = X - self.mean_
        return centered - (centered @ self.components_.T) @ self.components_


class Whiten(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Whitening: y = (x - mu) W, W = U diag(1/sqrt(s)) from the SVD of the covariance (ddof=1).

    Su et al. 2021, *Whitening Sentence Representations for Better Semantics and Faster Retrieval*
    (arXiv 2103.15316). ``n_components=k`` keeps the first k columns of W (the k directions of
    largest variance), reducing the width to k. After fitting, the fitted sample has identity
    covariance. Directions with (numerically) zero variance cannot be whitened: their column of W
    is set to 0 instead of dividing by 0, so they are dropped.
    """

    def __init__(self, n_components: int | None = None):
        self.n_components = n_components

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64)
        n, d = X.shape
        if n < 2:
            raise PostprocessError(
                "whitening needs at least 2 samples to estimate a covariance, got 1 sample"
            )
        k = d if self.n_components is None else self.n_components
        if not isinstance(k, int | np.integer) or not 1 <= k <= d:
            raise PostprocessError(
                f"whitening needs 1 <= n_components <= {d} (the width), got {k!r}"
            )
        self.mean_ = X.mean(axis=0)
        values, vectors = _top_eigen(X - self.mean_)
        variances = values / (n - 1)
        tol = max(variances[0], np.finfo(np.float64).tiny) * d * np.finfo(np.float64).eps
        inv_sqrt = np.divide(
            1.0, np.sqrt(variances), out=np.zeros_like(variances), where=variances > tol
        )
        self.explained_variance_ = variances[:k]
        self.components_ = (vectors * inv_sqrt)[:, :k]  # W, (d, k)
        self.n_components_ = int(k)
        self._n_features_out = int(k)
        return self

    def transform(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return (X - self.mean_) @ self.components_


# ----------------------------------------------------------------------------- function twins


def clip_dims(X, dims: Iterable[int]) -> np.ndarray:
    """``X`` with the columns ``dims`` set to 0 (float64 copy); see :class:`ClipDims`."""
    return ClipDims(tuple(dims)).fit_transform(X)


def mean_center(X) -> np.ndarray:
    """``X`` minus its column means; see :class:`MeanCenter`."""
    return MeanCenter().fit_transform(X)


def standardize(X) -> np.ndarray:
    """Per-dimension z-scores of ``X`` (zero-variance columns only centred); see :class:`Standardize`."""
    return Standardize().fit_transform(X)


def all_but_the_top(X, n_components: int | None = None) -> np.ndarray:
    """Mu & Viswanath's all-but-the-top of ``X`` (D = max(1, round(d/100)) by default)."""
    return AllButTheTop(n_components).fit_transform(X)


def whiten(X, n_components: int | None = None) -> np.ndarray:
    """Su et al.'s whitening of ``X``, optionally truncated to ``n_components``."""
    return Whiten(n_components).fit_transform(X)


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class PostprocessorSpec:
    """One registry entry: the estimator class, a label for menus, its parameters and a source."""

    cls: type
    label: str
    params: tuple[str, ...]
    source: str


POSTPROCESSORS: dict[str, PostprocessorSpec] = {
    "none": PostprocessorSpec(Identity, "none (raw vectors)", (), ""),
    "clip": PostprocessorSpec(
        ClipDims, "clip outlier dimensions to 0", ("dims",), "Luo et al. 2021, arXiv 2011.04393"
    ),
    "center": PostprocessorSpec(
        MeanCenter, "mean-centering", (), "Mu & Viswanath 2018, arXiv 1702.01417"
    ),
    "standardize": PostprocessorSpec(
        Standardize,
        "standardisation (z-score per dimension)",
        (),
        "Timkey & van Schijndel 2021, arXiv 2109.04404",
    ),
    "abtt": PostprocessorSpec(
        AllButTheTop,
        "all-but-the-top (remove top D principal components)",
        ("n_components",),
        "Mu & Viswanath 2018, arXiv 1702.01417",
    ),
    "whiten": PostprocessorSpec(
        Whiten,
        "whitening (optionally to k components)",
        ("n_components",),
        "Su et al. 2021, arXiv 2103.15316",
    ),
}


def make_postprocessor(name: str, **params) -> BaseEstimator:
    """An unfitted estimator for a registry name ("none" gives the identity).

    ``make_postprocessor("clip", dims=[308, 588])``, ``make_postprocessor("abtt", n_components=3)``,
    ``make_postprocessor("whiten", n_components=256)``. Parameters left as None use the defaults.
    """
    spec = POSTPROCESSORS.get(str(name).strip().lower())
    if spec is None:
        raise InputError(
            f"unknown post-processing {name!r}; choose one of: {', '.join(POSTPROCESSORS)}"
        )
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        accepted = ", ".join(spec.params) or "no parameters"
        raise InputError(
            f"post-processing {name!r} takes {accepted}; got unexpected {', '.join(unknown)}"
        )
    given = {k: v for k, v in params.items() if v is not None}
    if "dims" in given:
        given["dims"] = tuple(int(j) for j in given["dims"])
    if "n_components" in given:
        given["n_components"] = int(given["n_components"])
    return spec.cls(**given)


def parse_dims(text: str | Sequence[int], hidden_size: int | None = None) -> list[int]:
    """Dimension indices from text like ``"308, 588"`` / ``"308 588"`` or a sequence (sorted, unique).

    Empty text gives ``[]``. Raises :class:`InputError` for anything that is not a non-negative
    integer or is >= ``hidden_size``. The one parser of typed dims for pages and CLIs.
    """
    pieces = (
        str(text).replace(",", " ").replace(";", " ").split()
        if isinstance(text, str)
        else list(text)
    )
    upper = f" to {hidden_size - 1}" if hidden_size is not None else ""
    dims = []
    for piece in pieces:
        try:
            value = int(piece)
        except (TypeError, ValueError):
            raise InputError(
                f"dimension {piece!r} is not an integer; give integers separated by commas, e.g. 308,588 (0{upper})"
            ) from None
        if value < 0 or (hidden_size is not None and value >= hidden_size):
            raise InputError(f"dimension {value} is out of range; this model has dims 0{upper}")
        dims.append(value)
    return sorted(set(dims))
