"""The cached analyses several pages share (ui/work/results.py): a planted outlier dimension is the
headline of every state, and the Outliers page's criteria, the Overview's headline dims and a
second page asking again share one computation."""

from __future__ import annotations

import numpy as np

from isoscope.ui.work import results
from tests.comparison_inputs import token_result


def _planted_result(dim: int, corpus_sha: str):
    vectors = np.random.default_rng(0).normal(size=(2, 200, 16))
    vectors[:, :, dim] += 25.0  # one rogue dimension at every state
    return token_result(vectors, np.repeat(np.arange(20), 10), corpus_sha)


def test_a_planted_dimension_is_every_states_headline_computed_once(monkeypatch):
    calls = []
    real = results.geometry_outliers.criteria_by_state

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(results.geometry_outliers, "criteria_by_state", counted)
    result = _planted_result(5, "test_results_planted_5")
    criteria = results.criteria_by_state(result)  # the Outliers page
    assert results.outlier_dims_by_state(result) == [[5], [5]]  # the Overview
    assert results.outlier_dims_by_state(result, results.DEFAULT_THRESHOLDS) == [[5], [5]]
    assert results.criteria_by_state(result) is criteria
    assert len(calls) == 1
    other = _planted_result(9, "test_results_planted_9")  # another result: its own entry
    assert results.outlier_dims_by_state(other) == [[9], [9]]
    assert len(calls) == 2
