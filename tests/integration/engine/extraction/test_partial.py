"""Partial extractions (extract_partial, merge, finish) merge to the single run, in any order."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.extraction import (
    ExtractionSettings,
    extract,
)
from tests.extraction_checks import TEXTS
from tests.extraction_checks import assert_same_result as _assert_same_result


def test_uneven_partial_extractions_merge_to_the_single_run(tiny, corpus):
    """Parts of 1, 3 and 2 texts (out of order), merged in any grouping == one process."""
    from isoscope.engine.extraction import extract_partial, finish

    settings = ExtractionSettings(sample_size=20, token_budget=64)
    whole = extract(tiny, corpus, settings)
    groups = [[4], [0, 5, 2], [1, 3]]
    parts = [extract_partial(tiny, [TEXTS[i] for i in g], settings, text_ids=g) for g in groups]
    merged = parts[2].merge(parts[0]).merge(parts[1])
    result = finish(merged, corpus)
    _assert_same_result(result, whole, rtol=1e-5, atol=1e-5)  # different padding: float32 forward
    np.testing.assert_array_equal(result.argmax_count.sum(axis=1), whole.argmax_count.sum(axis=1))
    np.testing.assert_allclose(result.sample_vectors, whole.sample_vectors, atol=1e-5)
    # An empty part merges as a no-op.
    empty = extract_partial(tiny, [], settings, text_ids=[])
    _assert_same_result(finish(merged.merge(empty), corpus), result)
    with pytest.raises(ValueError, match="same texts"):
        parts[0].merge(extract_partial(tiny, [TEXTS[4]], settings, text_ids=[4]))
    with pytest.raises(ValueError, match="covers"):
        finish(extract_partial(tiny, list(TEXTS[:2]), settings), corpus)


def test_merge_order_changes_stats_only_by_float64_rounding(tiny, corpus):
    from isoscope.engine.extraction import extract_partial, finish

    settings = ExtractionSettings(sample_size=15, batch_size=1)  # one text per batch everywhere
    parts = lambda: [  # noqa: E731
        extract_partial(tiny, [t], settings, text_ids=[i]) for i, t in enumerate(TEXTS)
    ]
    fwd = parts()
    for p in fwd[1:]:
        fwd[0].merge(p)
    rev = parts()
    for p in rev[:-1][::-1]:
        rev[-1].merge(p)
    a, b = finish(fwd[0], corpus), finish(rev[-1], corpus)
    _assert_same_result(a, b)
    np.testing.assert_array_equal(a.sample_vectors, b.sample_vectors)
    np.testing.assert_array_equal(a.argmin_count, b.argmin_count)
    _assert_same_result(a, extract(tiny, corpus, settings))
