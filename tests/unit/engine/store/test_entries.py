"""isoscope.engine.store.entries: the key changes with whatever determines the result, and a result
comes back from its arrays as it was written (anything else reads as None)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.store.entries import cache_key, result_arrays, result_from_arrays
from tests.unit.engine.store.test_cache import fake_result


def test_the_key_changes_with_the_model_the_corpus_the_settings_and_the_kind():
    settings = ExtractionSettings()
    key = cache_key("fp", "sha", settings)
    assert key == cache_key("fp", "sha", ExtractionSettings()) and len(key) == 32
    others = {
        cache_key("fp2", "sha", settings),
        cache_key("fp", "sha2", settings),
        cache_key("fp", "sha", replace(settings, seed=settings.seed + 1)),
        cache_key("fp", "sha", settings, kind="compare"),
    }
    assert key not in others and len(others) == 4


def test_a_result_comes_back_from_its_arrays():
    result = replace(fake_result(3), notices=("a notice",), extra={"engine": {"name": "ray"}})
    arrays = result_arrays(result)
    assert all(a.dtype != object for a in arrays.values())  # read back without pickle
    back = result_from_arrays(arrays)
    np.testing.assert_array_equal(back.sample_vectors, result.sample_vectors)
    np.testing.assert_array_equal(back.tokens.token, result.tokens.token)
    assert (back.settings, back.texts, back.notices, back.extra) == (
        result.settings,
        result.texts,
        result.notices,
        result.extra,
    )


def test_arrays_of_another_layout_read_as_none():
    arrays = result_arrays(fake_result(0))
    del arrays["mean"]
    assert result_from_arrays(arrays) is None
    assert result_from_arrays({"meta": np.array("not json")}) is None
