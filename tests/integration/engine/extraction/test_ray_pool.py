"""The Ray workers' sample cut-off (isoscope.engine.extraction.ray_pool): cutting candidates at the
k-th priority never changes the merged sample, and a cut too tight is detected; no Ray needed."""

from __future__ import annotations

import numpy as np

from isoscope.engine.extraction import SampleCandidates, token_priority
from isoscope.engine.extraction.ray_pool import below_threshold, sample_is_complete


def test_priority_cut_off_on_planted_tokens_never_changes_the_sample():
    """Planted tokens in uneven parts: cutting at the exact k-th priority keeps the sample of one
    part; a cut-off below it is detected (the engine then reruns without one)."""
    rng = np.random.default_rng(3)
    counts = [1, 40, 7, 300, 2, 90]
    text_id = np.repeat(np.arange(len(counts)), counts)
    position = np.concatenate([np.arange(c) for c in counts]).astype(np.int32)
    priority = token_priority(11, text_id, position)
    vectors = rng.normal(size=(2, len(text_id), 4)).astype(np.float32)
    k = 50

    def sample_of(rows: np.ndarray, threshold: int | None) -> SampleCandidates:
        s = SampleCandidates(k, 2, 4, capacity=len(rows))
        entering, evicted = s.select(priority[rows])  # the k lowest of these rows
        pick = rows[entering]
        s.commit(evicted, priority[pick], text_id[pick], position[pick], vectors[:, pick])
        return below_threshold(s, threshold) if threshold is not None else s

    whole = sample_of(np.arange(len(text_id)), None)
    exact = int(np.sort(priority)[k - 1])
    bounds = np.cumsum([0, *counts])
    for threshold in (exact, exact + 12345, None):
        merged = None
        for a, b in reversed(list(zip(bounds[:-1], bounds[1:], strict=True))):
            part = sample_of(np.arange(a, b), threshold)
            merged = part if merged is None else merged.merged(part)
        assert set(merged.priority.tolist()) == set(whole.priority.tolist())
        order_m, order_w = np.argsort(merged.priority), np.argsort(whole.priority)
        np.testing.assert_array_equal(merged.vectors[:, order_m], whole.vectors[:, order_w])
    too_tight = sample_of(np.arange(len(text_id)), int(np.sort(priority)[k - 2]))

    class Part:  # what sample_is_complete reads of a PartialExtraction
        def __init__(self, sample):
            self.sample, self.stats = sample, type("S", (), {"count": len(text_id)})()

    assert sample_is_complete(Part(whole), None)
    assert not sample_is_complete(Part(too_tight), int(np.sort(priority)[k - 2]))
