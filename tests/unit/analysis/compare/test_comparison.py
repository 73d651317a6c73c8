"""The per-state comparison on synthetic arrays with planted signals: outlier dims planted in B
only must show as gained (linear CKA itself: test_cka.py, the records: test_records.py, their
storage: test_storage.py)."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.compare.comparison import (
    abs_mean_difference,
    state_rows,
    summarize,
)
from tests.comparison_inputs import planted_pair, token_result

# ----------------------------------------------------------------------------- per-state rows


_result = token_result


@pytest.fixture(scope="module")
def planted():
    """A: isotropic noise in 2 states. B: the same, plus dim 5 shifted to -8 in state 1 (an
    outlier that B gains, which also makes B anisotropic there)."""
    return planted_pair()


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


def test_comparison_is_split_into_cka_records_storage_and_orchestration():
    """Linear CKA, the comparison's records and its disk storage live in their own modules; the
    ``comparison`` module orchestrates and re-exports them, so its callers need one import."""
    from isoscope.analysis.compare import cka, comparison, records, storage

    assert comparison.linear_cka is cka.linear_cka and cka.linear_cka.__module__ == cka.__name__
    assert comparison.Comparison is records.Comparison
    assert comparison.cached_compare is storage.cached_compare
    assert comparison.compare.__module__ == comparison.__name__
    assert all(hasattr(comparison, name) for name in comparison.__all__)
