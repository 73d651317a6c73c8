"""isoscope.analysis.summaries: the state each geometry sentence names, and its numbers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from isoscope.analysis.summaries import first_position_gap, mean_shift_peak

NAMES = ("emb", "1", "2", "3")


def _iso(anisotropy, isoscore=(0.1, 0.2, 0.3, 0.4)):
    return SimpleNamespace(
        state_names=NAMES, anisotropy=np.array(anisotropy), isoscore=np.array(isoscore)
    )


def test_mean_shift_peak_names_the_most_anisotropic_state():
    peak = mean_shift_peak(_iso([0.2, 0.9, 0.5, 0.9]), _iso([0.0, 0.05, 0.01, 0.02]))
    assert (peak.state, peak.state_name) == (1, "1")  # the first of the tie
    assert peak.anisotropy_raw == pytest.approx(0.9)
    assert peak.anisotropy_centered == pytest.approx(0.05)
    assert peak.isoscore == pytest.approx(0.2)


def test_first_position_gap_picks_the_largest_absolute_change():
    contrast = SimpleNamespace(
        state_names=NAMES,
        anisotropy_with=np.array([0.5, 0.3, 0.9, 0.2]),
        anisotropy_without=np.array([0.4, 0.7, 0.8, 0.2]),  # state 1 moves most (-0.4)
        max_abs_mean_with=np.array([1.0, 30.0, 5.0, 1.0]),
        max_abs_mean_without=np.array([1.0, 3.0, 5.0, 1.0]),
    )
    gap = first_position_gap(contrast)
    assert (gap.state, gap.state_name) == (1, "1")
    assert (gap.anisotropy_with, gap.anisotropy_without) == (pytest.approx(0.3), pytest.approx(0.7))
    assert gap.mean_ratio == pytest.approx(10.0)


def test_first_position_gap_floors_a_zero_mean():
    contrast = SimpleNamespace(
        state_names=("emb",),
        anisotropy_with=np.array([0.5]),
        anisotropy_without=np.array([0.1]),
        max_abs_mean_with=np.array([1e-6]),
        max_abs_mean_without=np.array([0.0]),
    )
    assert first_position_gap(contrast).mean_ratio == pytest.approx(1e6)
