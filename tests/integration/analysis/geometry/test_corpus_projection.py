"""Every token of one state (issue 35): the spilled second pass equals the extraction's vectors,
and the streaming PCA equals an in-memory PCA of the same rows."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA

from backend.analysis.geometry.corpus_projection import corpus_before_after
from backend.analysis.geometry.projections import fit_postprocessor
from backend.engine.corpus import Corpus
from backend.engine.extraction import ExtractionSettings, extract
from backend.engine.extraction.spill import Cancelled, spill_state
from backend.engine.models import load_model
from tests.extraction_checks import TEXTS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_all(tiny_bert_dir):
    """A tiny BERT's extraction whose token sample holds every token (the in-memory reference)."""
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    result = extract(loaded, Corpus(TEXTS, "test texts"), ExtractionSettings(sample_size=100_000))
    assert len(result.sample_index) == result.num_tokens
    return loaded, result


def test_spilled_rows_are_the_extractions_vectors(tiny_all, tmp_path):
    loaded, result = tiny_all
    spilled = spill_state(loaded, result, 2, tmp_path / "s.f32")
    every = np.empty((result.num_tokens, result.hidden_size), dtype=np.float32)
    every[result.sample_index] = result.sample_vectors[2]
    np.testing.assert_allclose(spilled.take(np.arange(spilled.rows)), every, atol=1e-5)
    chunked = np.concatenate([b.copy() for _, b in spilled.chunks(7)])
    np.testing.assert_array_equal(chunked, spilled.take(np.arange(spilled.rows)))


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


def test_a_second_pass_stops_when_asked_and_leaves_no_file(tiny_all, tmp_path):
    loaded, result = tiny_all
    with pytest.raises(Cancelled):
        spill_state(loaded, result, 1, tmp_path / "s.f32", progress=lambda done, total: False)
    assert list(tmp_path.iterdir()) == []
