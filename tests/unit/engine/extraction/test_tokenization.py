"""The batching rule and token metadata without a model: longest texts first, batches within the
text and padded-token budgets, the analysed-token masks, and what counts as punctuation."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from isoscope.engine.budget.batching import batch_count, length_order, plan_batches
from isoscope.engine.extraction.tokenization import TokenizedCorpus, collector_paused, is_punct


def test_length_order_is_longest_first_stable_and_drops_empty_texts():
    lengths = np.array([3, 0, 5, 3, 1, 0])
    assert length_order(lengths).tolist() == [2, 0, 3, 4]


def test_batch_count_respects_both_caps_and_takes_at_least_one():
    assert batch_count(width=10, left=100, batch_size=4, token_budget=1000) == 4
    assert batch_count(width=10, left=100, batch_size=32, token_budget=35) == 3
    assert batch_count(width=10, left=2, batch_size=32, token_budget=1000) == 2
    assert batch_count(width=500, left=9, batch_size=32, token_budget=100) == 1
    assert batch_count(width=0, left=5, batch_size=8, token_budget=3) == 3


@pytest.mark.parametrize(("batch_size", "budget"), [(2, None), (32, 12), (3, 7), (1, 1)])
def test_plan_batches_cover_every_text_once_within_the_caps(batch_size, budget):
    lengths = np.array([4, 0, 7, 2, 2, 5, 1, 3])
    batches = plan_batches(lengths, batch_size, budget)
    flat = np.concatenate(batches).tolist()
    assert sorted(flat) == [0, 2, 3, 4, 5, 6, 7]  # text 1 has no tokens
    assert flat == length_order(lengths).tolist()  # in the length order, contiguous
    for b in batches:
        assert 1 <= len(b) <= batch_size
        if budget is not None:
            assert len(b) == 1 or len(b) * lengths[b].max() <= budget


def test_analysed_masks_and_lengths():
    tok = TokenizedCorpus(
        [np.array([101, 7, 8, 102]), np.array([5])],
        [np.array([True, False, False, True]), np.array([False])],
        [np.array([-1, 0, 1, -1]), np.array([0])],
        truncated=0,
        max_length=8,
    )
    assert tok.lengths.tolist() == [4, 1]
    everything = tok.analysed(exclude_special=False, exclude_first=False)
    assert [m.tolist() for m in everything] == [[True] * 4, [True]]
    no_special = tok.analysed(exclude_special=True, exclude_first=False)
    assert [m.tolist() for m in no_special] == [[False, True, True, False], [True]]
    no_first = tok.analysed(exclude_special=False, exclude_first=True)
    assert [m.tolist() for m in no_first] == [[False, True, True, True], [False]]


@pytest.mark.parametrize(
    ("token", "expected"),
    [(",", True), ("##.", True), ("Ġ!", True), ("▁?", True), ("$", True), ("...", True),
     ("a", False), ("##ing", False), ("Ġ", False), ("", False), ("a.", False), ("3", False)],
)  # fmt: skip
def test_is_punct(token, expected):
    assert is_punct(token) is expected


def test_the_collector_pause_nests_across_threads_and_restores_the_state():
    """Paused while any thread is inside; back on only when the last leaves; never turned on
    where it was off before."""
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other():
        with collector_paused():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=other)
    with collector_paused():
        assert not gc.isenabled()
        worker.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other thread is still inside
    release.set()
    worker.join(10)
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
