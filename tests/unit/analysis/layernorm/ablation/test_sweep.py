"""The one-dim-at-a-time sweep: batched equals the naive loop, and it can be stopped."""

from __future__ import annotations

import threading

import numpy as np

from isoscope.analysis.layernorm.ablation.sweep import sweep
from tests.ablation_models import TEXTS, same, snapshot


def test_batched_sweep_matches_naive_loop(tiny_loaded):
    before = snapshot(tiny_loaded.model)
    batched = sweep(tiny_loaded, TEXTS, dims=range(10), copies=4, max_length=16)
    naive = sweep(tiny_loaded, TEXTS, dims=range(10), method="naive", max_length=16)
    assert batched.complete and batched.dims.tolist() == list(range(10))
    np.testing.assert_allclose(batched.embedding_cosine, naive.embedding_cosine, atol=1e-6)
    np.testing.assert_allclose(batched.token_cosine, naive.token_cosine, atol=1e-6)
    assert (batched.embedding_cosine[:, -1] < 1).all()
    assert same(before, snapshot(tiny_loaded.model))


def test_sweep_can_be_stopped(tiny_loaded):
    stopped = sweep(
        tiny_loaded,
        TEXTS,
        dims=range(12),
        copies=4,
        max_length=16,
        progress=lambda done, total: False,
    )
    assert not stopped.complete and stopped.dims.tolist() == [0, 1, 2, 3]
    event = threading.Event()
    event.set()
    none = sweep(tiny_loaded, TEXTS, dims=range(12), copies=4, max_length=16, stop=event)
    assert not none.complete and len(none.dims) == 0
