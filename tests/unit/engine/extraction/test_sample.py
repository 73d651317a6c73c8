"""The token sample without a model: the planned sample equals the streaming selection, and the sample
buffer is zeroed, writable and picklable."""

from __future__ import annotations

import numpy as np


def test_planned_sample_equals_the_streaming_selection():
    """extract_partial plans the sample before any forward pass; the Ray engine still streams
    candidates with select/commit. Both keep the same tokens, and ordered() returns them in
    (text, position) order."""
    from isoscope.engine.extraction import SampleCandidates, token_priority

    rng = np.random.default_rng(0)
    text_id = np.repeat(np.arange(40), rng.integers(1, 30, size=40))
    position = np.concatenate([np.arange(c) for c in np.bincount(text_id)])
    priority = token_priority(3, text_id, position)
    vectors = rng.normal(size=(2, len(priority), 4)).astype(np.float32)
    planned, slot = SampleCandidates.planned(50, 2, 4, priority, text_id, position)
    for batch in np.array_split(rng.permutation(len(priority)), 9):  # any batch order
        chosen = batch[slot[batch] >= 0]
        planned.write(0, slot[chosen], vectors[:, chosen])
    streamed = SampleCandidates(50, 2, 4, capacity=len(priority))
    for batch in np.array_split(np.arange(len(priority)), 7):
        entering, evicted = streamed.select(priority[batch])
        pick = batch[entering]
        streamed.commit(evicted, priority[pick], text_id[pick], position[pick], vectors[:, pick])
    for got, ref in zip(planned.ordered(), streamed.ordered(), strict=True):
        np.testing.assert_array_equal(got, ref)
    assert (slot >= 0).sum() == 50


def test_sample_buffer_is_zeroed_writable_and_picklable():
    import pickle

    from isoscope.engine.extraction.sample import _zeros

    for shape in ((3, 5, 2), (4, 1000, 600)):  # below and above the pre-faulted size
        buf = _zeros(shape, np.float32)
        assert buf.shape == shape and buf.dtype == np.float32 and not buf.any()
        buf[1, 2, 1] = 7.0
        copy = pickle.loads(pickle.dumps(buf))
        assert copy[1, 2, 1] == 7.0 and copy.shape == shape
