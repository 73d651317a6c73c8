"""Every token of one state (issue 35): the spilled second pass equals the extraction's vectors,
and the streaming PCA equals an in-memory PCA of the same rows."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA

from isoscope.analysis.projections.all_tokens import corpus_before_after
from isoscope.analysis.projections.methods import fit_postprocessor
from isoscope.engine.extraction.spill import spill_state

pytestmark = pytest.mark.integration


def test_streaming_pca_equals_in_memory_pca(tiny_all, tmp_path):
    loaded, result = tiny_all
    spilled = spill_state(loaded, result, 1, tmp_path / "s.f32")
    x = spilled.take(np.arange(spilled.rows)).astype(np.float64)
    fit = result.sample_vectors[1]
    before, after = corpus_before_after(
        spilled, fit, "pca", "abtt", {"n_components": 1}, chunk_rows=13
    )
    processed = fit_postprocessor(fit, "abtt", {"n_components": 1}).transform(x)
    for projection, vectors in ((before, x), (after, processed)):
        reference = PCA(n_components=2, svd_solver="full").fit(vectors)
        np.testing.assert_allclose(projection.coords, reference.transform(vectors), atol=1e-4)
        np.testing.assert_allclose(
            projection.explained_variance_ratio, reference.explained_variance_ratio_, rtol=1e-6
        )
