"""Cached analyses that several pages share, keyed by cheap values (the idiom of :mod:`isoscope.ui.work.cached`):
a result's outlier criteria and headline dims (Outliers, Overview, LayerNorm, Positional,
Similarity, Projections and the server's prewarm) and its anisotropy (Overview, Anisotropy and
prewarm). One function each, so two pages asking for the same thing share one computation.
A function used by one page only lives in that page's view (ui/views/<page>.py).
"""

from __future__ import annotations

import numpy as np

from isoscope.analysis import outliers as geometry_outliers
from isoscope.analysis.anisotropy import N_PAIRS, PAIR_SEED, anisotropy_by_state
from isoscope.analysis.outliers import OutlierThresholds
from isoscope.analysis.outliers import outlier_dims_by_state as headline_dims_by_state
from isoscope.engine.extraction import ExtractionResult
from isoscope.ui.work.cached import cached

DEFAULT_THRESHOLDS = OutlierThresholds()


# ----------------------------------------------------------------------------- outliers and isotropy


@cached
def criteria_by_state(
    result: ExtractionResult, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> list[dict[str, list[int]]]:
    """:func:`isoscope.analysis.outliers.criteria_by_state`: all four criteria at every hidden state."""
    return geometry_outliers.criteria_by_state(result, thresholds)


@cached
def outlier_dims_by_state(
    result: ExtractionResult, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> list[list[int]]:
    """The headline outlier dims (z-score or extreme-index) of every state, by |mean| descending."""
    return headline_dims_by_state(result, criteria=criteria_by_state(result, thresholds))


@cached
def anisotropy(result: ExtractionResult) -> np.ndarray:
    """Mean cosine of N_PAIRS random different-text pairs per hidden state (Ethayarajh 2019)."""
    return anisotropy_by_state(result, N_PAIRS, PAIR_SEED)
