"""Queries and keys of MiniLM against its random-init copy (qk_stats): trained heads are sharper."""

from __future__ import annotations

import numpy as np

from isoscope.analysis.positional.qk import qk_stats
from isoscope.engine.load.models import random_like


def test_queries_and_keys_trained_vs_random(minilm, bundled):
    texts = bundled.texts[:24]
    trained = qk_stats(minilm, texts, max_length=32, label="trained")
    random = qk_stats(random_like(minilm, seed=0), texts, max_length=32, label="random")
    assert trained.cos_qk.shape == (6, 12)
    assert np.all(np.abs(trained.cos_qk) <= 1 + 1e-12)
    # Random init: near-uniform attention; trained heads are sharper and their mean q drifts further out.
    assert random.entropy_norm.mean() > 0.95
    assert trained.entropy_norm.mean() < random.entropy_norm.mean() - 0.1
    assert trained.mean_q_norm.mean() > random.mean_q_norm.mean()
    assert set(trained.frame().columns) >= {"layer", "head", "cos_qk", "entropy"}
