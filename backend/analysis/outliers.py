"""Outlier dimensions of hidden states: the four criteria of docs/methods.md section 1.

- Extreme-index frequency (Luo, Kulmizev & Mao 2021, arXiv 2011.04393): share of tokens whose
  minimum / maximum sits in dimension j; outlier when the share >= ``threshold`` (default 0.5).
- Mean-magnitude z-score (Timkey & van Schijndel 2021, arXiv 2109.04404; Kovaleva et al. 2021):
  |mu_j - mean(mu)| > k * std(mu), k = 3.
- Quantile rule (Macocco et al. 2025): median_t |H[t, j]| > the 0.99-quantile of all |H|.
- Variance rule (Rudman et al. 2023): Var_t H[:, j] >= 5 x mean_j Var_t H[:, j].

All functions take one hidden state's arrays and return sorted dimension indices;
:func:`criteria_by_state` and :func:`outlier_dims_by_state` apply them to every hidden state of an
ExtractionResult (the only loops over states; every caller uses them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from isoscope.engine.params import Interval

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from isoscope.engine.extraction import ExtractionResult

CRITERIA = ("extreme_index", "zscore", "quantile", "variance")
HEADLINE_CRITERIA = ("zscore", "extreme_index")  # the "outlier dims" every other page shows
CRITERION_LABELS = {
    "extreme_index": "Extreme-index frequency (Luo et al. 2021)",
    "zscore": "Mean-magnitude z-score (Timkey & van Schijndel 2021)",
    "quantile": "Quantile rule (Macocco et al. 2025)",
    "variance": "Variance rule (Rudman et al. 2023)",
}


# The four thresholds, declared once: the defaults of :class:`OutlierThresholds`, the Outlier
# page's sliders and the values its links carry (ui/widgets/ranges.py).
EXTREME_SHARE = Interval(
    0.05, 1.0, 0.5, step=0.05, name="extreme_share",
    help="Luo et al.: share of tokens whose min or max sits in the dimension.",
    citation="Luo, Kulmizev & Mao 2021, arXiv 2011.04393",
)  # fmt: skip
ZSCORE_K = Interval(
    1.0, 10.0, 3.0, step=0.5, name="zscore_k",
    help="Timkey & van Schijndel: standard deviations from the average mean.",
    citation="Timkey & van Schijndel 2021, arXiv 2109.04404",
)  # fmt: skip
QUANTILE = Interval(
    0.90, 0.999, 0.99, step=0.001, name="quantile",
    help="Macocco et al.: quantile of all |values| (token sample).",
    citation="Macocco et al. 2025 (docs/methods.md section 1)",
)  # fmt: skip
VARIANCE_FACTOR = Interval(
    1.0, 20.0, 5.0, step=0.5, name="variance_factor",
    help="Rudman et al.: variance relative to the average over dimensions.",
    citation="Rudman et al. 2023 (docs/methods.md section 1)",
)  # fmt: skip


@dataclass(frozen=True)
class OutlierThresholds:
    """Thresholds of the four criteria (the dashboard's sliders), defaults from the declarations
    above (not checked against their ranges: an analysis may ask for a stricter rule)."""

    extreme_share: float = EXTREME_SHARE.default
    zscore_k: float = ZSCORE_K.default
    quantile: float = QUANTILE.default
    variance_factor: float = VARIANCE_FACTOR.default


def extreme_index_outliers(
    argmin_freq: np.ndarray, argmax_freq: np.ndarray, threshold: float = EXTREME_SHARE.default
) -> np.ndarray:
    """Dims that hold the min or the max of at least ``threshold`` of all tokens (Luo et al.)."""
    return np.flatnonzero((argmin_freq >= threshold) | (argmax_freq >= threshold))


def zscore_outliers(mean: np.ndarray, k: float = ZSCORE_K.default) -> np.ndarray:
    """Dims whose mean lies more than ``k`` standard deviations from the mean of the means."""
    spread = mean.std()
    if spread == 0:
        return np.array([], dtype=np.int64)
    return np.flatnonzero(np.abs(mean - mean.mean()) > k * spread)


def quantile_outliers(vectors: np.ndarray, q: float = QUANTILE.default) -> np.ndarray:
    """Dims whose median |value| exceeds the ``q``-quantile of all |values| (tokens x dims)."""
    magnitude = np.abs(np.asarray(vectors, dtype=np.float64))
    if magnitude.size == 0:
        return np.array([], dtype=np.int64)
    return np.flatnonzero(np.median(magnitude, axis=0) > np.quantile(magnitude, q))


def variance_outliers(variance: np.ndarray, factor: float = VARIANCE_FACTOR.default) -> np.ndarray:
    """Dims whose variance is at least ``factor`` times the average variance across dims."""
    avg = variance.mean()
    if avg == 0:
        return np.array([], dtype=np.int64)
    return np.flatnonzero(variance >= factor * avg)


def outliers_by_criterion(
    result: ExtractionResult, state: int, thresholds: OutlierThresholds | None = None
) -> dict[str, list[int]]:
    """All four criteria at hidden state ``state`` of an ExtractionResult.

    The quantile rule needs order statistics, which do not stream: it runs on the token sample.
    """
    t = thresholds or OutlierThresholds()
    return {
        "extreme_index": extreme_index_outliers(
            result.argmin_freq[state], result.argmax_freq[state], t.extreme_share
        ).tolist(),
        "zscore": zscore_outliers(result.mean[state], t.zscore_k).tolist(),
        "quantile": quantile_outliers(result.sample_vectors[state], t.quantile).tolist(),
        "variance": variance_outliers(result.variance[state], t.variance_factor).tolist(),
    }


def headline_dims(found: Mapping[str, Sequence[int]], mean: np.ndarray | None = None) -> list[int]:
    """The headline rule, the one place it is written: the dims flagged by any criterion in
    :data:`HEADLINE_CRITERIA` (z-score or extreme-index, the two the source papers use for hidden
    states). ``found`` maps criterion -> dims (as :func:`outliers_by_criterion` returns); sorted
    by |``mean``| descending when the state's mean vector is given (ties by index), else by index."""
    dims = sorted({int(j) for c in HEADLINE_CRITERIA for j in found[c]})
    if mean is not None:
        dims.sort(key=lambda j: -abs(float(mean[j])))
    return dims


def outlier_dims(
    result: ExtractionResult, state: int, thresholds: OutlierThresholds | None = None
) -> list[int]:
    """The headline outlier set of a hidden state (:func:`headline_dims`), sorted by |mean|
    descending."""
    return headline_dims(outliers_by_criterion(result, state, thresholds), result.mean[state])


def criteria_by_state(
    result: ExtractionResult, thresholds: OutlierThresholds | None = None
) -> list[dict[str, list[int]]]:
    """:func:`outliers_by_criterion` at every hidden state (index 0 = emb): the one loop over states
    that every page, figure, command and report reads."""
    return [outliers_by_criterion(result, s, thresholds) for s in range(result.num_states)]


def outlier_dims_by_state(
    result: ExtractionResult,
    thresholds: OutlierThresholds | None = None,
    *,
    criteria: Sequence[Mapping[str, Sequence[int]]] | None = None,
) -> list[list[int]]:
    """The headline outlier dims (:func:`headline_dims`) of every hidden state, each sorted by
    |mean| descending. ``criteria`` (what :func:`criteria_by_state` returned for the same
    ``thresholds``) saves computing the criteria again."""
    found = criteria if criteria is not None else criteria_by_state(result, thresholds)
    return [headline_dims(f, result.mean[s]) for s, f in enumerate(found)]


def auto_clip_dims(result: ExtractionResult) -> list[list[int]]:
    """What clip "auto" zeroes at every hidden state, the one meaning of "auto" everywhere (export,
    the Clipping page, Similarity, the ``sts`` command, the report): each state's headline outlier
    dims (:func:`outlier_dims_by_state`), by |mean| descending."""
    return outlier_dims_by_state(result)


def outlier_table(result: ExtractionResult, thresholds: OutlierThresholds | None = None):
    """Long table: one row per (hidden state, dim) flagged by any criterion, with its statistics
    and a boolean column per criterion. Returns a pandas DataFrame."""
    import pandas as pd  # lazy: a slow import that only the table views need

    rows = []
    names = result.state_names
    for s, found in enumerate(criteria_by_state(result, thresholds)):
        name = names[s]
        for j in sorted(set().union(*map(set, found.values()))):
            rows.append(
                {
                    "state": name,
                    "dim": j,
                    "mean": result.mean[s, j],
                    "variance": result.variance[s, j],
                    "argmin_share": result.argmin_freq[s, j],
                    "argmax_share": result.argmax_freq[s, j],
                    **{c: j in found[c] for c in CRITERIA},
                }
            )
    columns = ["state", "dim", "mean", "variance", "argmin_share", "argmax_share", *CRITERIA]
    return pd.DataFrame(rows, columns=columns)


def strongest_dims(mean: np.ndarray, top: int = 5) -> list[int]:
    """The ``top`` dims by |mean| (ties broken by index)."""
    return [int(j) for j in np.argsort(-np.abs(mean), kind="stable")[:top]]
