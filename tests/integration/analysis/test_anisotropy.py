"""Isotropy metrics and post-processing on the bundled MiniLM and the bundled corpus."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.anisotropy import (
    anisotropy_by_state,
    by_state,
    clipped_anisotropy_by_state,
)
from isoscope.analysis.outliers import outlier_dims
from isoscope.analysis.projections.postprocess import make_postprocessor


@pytest.fixture(scope="module")
def raw(minilm_result):
    return by_state(minilm_result)


def test_clipping_the_detected_outliers_lowers_anisotropy_in_middle_layers(minilm_result, raw):
    dims = [outlier_dims(minilm_result, s) for s in range(minilm_result.num_states)]
    clipped = clipped_anisotropy_by_state(minilm_result, dims)
    middle = range(1, minilm_result.num_layers)  # hidden states 1 .. L-1
    for s in middle:
        assert dims[s], f"no outlier dims detected in hidden state {s}"
        assert clipped[s] < 0.6 * raw.anisotropy[s], (s, clipped[s], raw.anisotropy[s])
    # the same numbers through by_state with a per-state clipper
    via_estimator = by_state(
        minilm_result, lambda s: make_postprocessor("clip", dims=dims[s]), similarity=False
    )
    np.testing.assert_allclose(via_estimator.anisotropy, clipped, atol=1e-9)


def test_raw_metrics_are_sane(minilm_result, raw):
    np.testing.assert_allclose(raw.anisotropy, anisotropy_by_state(minilm_result), atol=1e-12)
    assert np.all((raw.isoscore > 0) & (raw.isoscore < 1))
    assert raw.n_recurring_words > 50
    # a word's occurrences are more alike than random token pairs (Ethayarajh 2019) ...
    assert np.all(raw.self_similarity_adjusted > 0)
    # ... and contextualisation makes them less alike with depth: emb > last hidden state
    assert raw.self_similarity[0] > raw.self_similarity[-1]
    assert np.all(raw.intra_similarity_adjusted > 0)


def test_the_top_cosine_dim_of_middle_layers_is_a_detected_outlier(minilm_result, raw):
    for s in range(1, minilm_result.num_layers):
        top_dim, share = raw.top_dims[s][0]
        assert top_dim in outlier_dims(minilm_result, s)
        assert share > 0.15


def test_standardize_and_whitening(minilm_result, raw):
    std = by_state(minilm_result, make_postprocessor("standardize"), similarity=False)
    assert np.all(np.abs(std.anisotropy) < 0.03)
    assert np.all(std.isoscore > raw.isoscore)
    white = by_state(minilm_result, make_postprocessor("whiten"), similarity=False)
    assert np.all(white.isoscore > 0.99)
