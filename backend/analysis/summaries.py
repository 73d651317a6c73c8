"""The one-line findings the pages print about the geometry: which hidden state to name and the
numbers beside it. Kept here (not in the pages) so that a page only formats them.

- :func:`mean_shift_peak`: the Anisotropy page's "mean cosine vs IsoScore" sentence.
- :func:`first_position_gap`: the Overview's "the first position" sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from isoscope.analysis.anisotropy import StateIsotropy
    from isoscope.analysis.massive.first_position import FirstPositionContrast


@dataclass(frozen=True)
class MeanShiftPeak:
    """The hidden state with the highest raw anisotropy, before and after mean-centering."""

    state: int
    state_name: str
    anisotropy_raw: float
    anisotropy_centered: float
    isoscore: float  # of the raw vectors (centering does not change it)


def mean_shift_peak(raw: StateIsotropy, centered: StateIsotropy) -> MeanShiftPeak:
    """Where subtracting the mean vector matters most: the state of the highest raw mean cosine
    (the first one on a tie), with its mean cosine raw and centred and its IsoScore."""
    values = np.asarray(raw.anisotropy, dtype=np.float64)
    peak = max(range(len(values)), key=lambda s: values[s])
    return MeanShiftPeak(
        state=peak,
        state_name=raw.state_names[peak],
        anisotropy_raw=float(values[peak]),
        anisotropy_centered=float(centered.anisotropy[peak]),
        isoscore=float(raw.isoscore[peak]),
    )


@dataclass(frozen=True)
class FirstPositionGap:
    """The hidden state whose anisotropy the first position changes most."""

    state: int
    state_name: str
    anisotropy_with: float
    anisotropy_without: float
    mean_ratio: float  # largest |mean| of a dim with position 0 / without it, at that state


def first_position_gap(contrast: FirstPositionContrast) -> FirstPositionGap:
    """The state of the largest |anisotropy with - without position 0| and, there, how many
    times larger the largest |mean| of a dim is with the first position (the denominator is
    floored at 1e-12)."""
    gap = np.asarray(contrast.anisotropy_with) - np.asarray(contrast.anisotropy_without)
    s = int(np.abs(gap).argmax())
    ratio = contrast.max_abs_mean_with[s] / max(contrast.max_abs_mean_without[s], 1e-12)
    return FirstPositionGap(
        state=s,
        state_name=contrast.state_names[s],
        anisotropy_with=float(contrast.anisotropy_with[s]),
        anisotropy_without=float(contrast.anisotropy_without[s]),
        mean_ratio=float(ratio),
    )
