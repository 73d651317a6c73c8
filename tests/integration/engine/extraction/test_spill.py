"""The second pass of one state (issue 35): rows equal the extraction's vectors, chunks equal
the whole file, and a cancelled pass leaves no file."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.extraction.spill import Cancelled, spill_state

pytestmark = pytest.mark.integration


def test_spilled_rows_are_the_extractions_vectors(tiny_all, tmp_path):
    loaded, result = tiny_all
    spilled = spill_state(loaded, result, 2, tmp_path / "s.f32")
    every = np.empty((result.num_tokens, result.hidden_size), dtype=np.float32)
    every[result.sample_index] = result.sample_vectors[2]
    np.testing.assert_allclose(spilled.take(np.arange(spilled.rows)), every, atol=1e-5)
    chunked = np.concatenate([b.copy() for _, b in spilled.chunks(7)])
    np.testing.assert_array_equal(chunked, spilled.take(np.arange(spilled.rows)))


def test_a_second_pass_stops_when_asked_and_leaves_no_file(tiny_all, tmp_path):
    loaded, result = tiny_all
    with pytest.raises(Cancelled):
        spill_state(loaded, result, 1, tmp_path / "s.f32", progress=lambda done, total: False)
    assert list(tmp_path.iterdir()) == []
