"""The log10 |x| histogram and its median against numpy on planted magnitudes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.loghist import (
    BINS_PER_DECADE,
    LOG_HI,
    LOG_LO,
    N_BINS,
    bin_edge,
    log_histogram,
    median_bin,
    median_from_histogram,
)


def test_histogram_equals_numpy_and_clamps_out_of_range_values():
    rng = np.random.default_rng(0)
    x = np.exp(rng.normal(0.0, 3.0, size=20_000)).astype(np.float32)
    x[:5] = [0.0, 1e-9, 1e7, 1e5, 10.0**LOG_LO]  # below, below, above, at the top, at the bottom
    hist = log_histogram(torch.from_numpy(x)).numpy()
    assert hist.dtype == np.int64 and hist.shape == (N_BINS,) == (2200,)
    assert hist.sum() == len(x)  # nothing falls outside
    logs = np.log10(np.clip(x.astype(np.float64), 10.0**LOG_LO, 10.0 ** (LOG_HI - 1e-3)))
    ref, _ = np.histogram(logs, bins=N_BINS, range=(LOG_LO, LOG_HI))
    # float32 log10 may move a value on a bin edge to its neighbour
    assert np.abs(hist - ref).sum() <= 10
    assert hist[0] >= 3 and hist[-1] >= 2  # the clamped ones sit in the end bins


@pytest.mark.parametrize("seed", [1, 2])
def test_median_from_histogram_is_within_one_bin_of_numpy(seed):
    rng = np.random.default_rng(seed)
    rows = [np.abs(rng.normal(0, s, size=5001)) for s in (1e-3, 1.0, 50.0)]
    hist = np.stack([log_histogram(torch.from_numpy(r)).numpy() for r in rows])
    got = median_from_histogram(hist)
    want = np.array([np.median(r) for r in rows])
    np.testing.assert_allclose(np.log10(got), np.log10(want), atol=1.0 / BINS_PER_DECADE)
    idx = median_bin(hist)
    assert np.all(bin_edge(idx) <= want * (1 + 1e-6)) and np.all(want < bin_edge(idx + 1) * 1.01)


def test_median_of_one_row_one_value_and_of_an_empty_row():
    hist = log_histogram(torch.full((7,), 3.0)).numpy()
    assert median_from_histogram(hist).shape == (1,)  # a 1-D histogram is one row
    assert median_from_histogram(hist)[0] == pytest.approx(3.0, rel=np.log(10) / BINS_PER_DECADE)
    assert np.isnan(median_from_histogram(np.zeros((2, N_BINS)))).all()


def test_bin_edges():
    assert bin_edge(0) == pytest.approx(10.0**LOG_LO)
    assert bin_edge(N_BINS) == pytest.approx(10.0**LOG_HI)
    assert bin_edge(np.array([BINS_PER_DECADE * 6])) == pytest.approx([1.0])
