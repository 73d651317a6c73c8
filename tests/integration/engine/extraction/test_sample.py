"""The token sample of a real extraction: the k smallest seeded hash priorities, capped by a byte budget."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import (
    ExtractionSettings,
    extract,
)


def test_sample_is_the_k_smallest_hash_priorities(tiny, corpus):
    """The partition-independent rule: priority = seeded splitmix64 of (text, position)."""
    from isoscope.engine.extraction import token_priority

    result = extract(tiny, corpus, ExtractionSettings(sample_size=25, seed=7))
    pri = token_priority(7, result.tokens.text_id, result.tokens.position)
    assert len(np.unique(pri)) == len(pri)
    np.testing.assert_array_equal(result.sample_index, np.sort(np.argsort(pri)[:25]))
    other_seed = extract(tiny, corpus, ExtractionSettings(sample_size=25, seed=8))
    assert not np.array_equal(other_seed.sample_index, result.sample_index)


def test_sample_budget_caps_tokens_per_state(tiny, corpus):
    S, d = tiny.info.num_layers + 1, tiny.info.hidden_size
    budget = S * d * 4 * 12 + 5  # room for 12 tokens
    got = extract(tiny, corpus, ExtractionSettings(sample_size=40, sample_budget_bytes=budget))
    assert got.sample_vectors.shape == (S, 12, d)
    assert any("12 tokens per state to stay within" in n for n in got.notices)
    wide = extract(tiny, corpus, ExtractionSettings(sample_size=40))
    np.testing.assert_array_equal(  # a budget cap keeps a prefix of the priority order
        np.intersect1d(got.sample_index, wide.sample_index), got.sample_index
    )
    from isoscope.engine.extraction import sample_limit

    with pytest.raises(InputError, match="fewer than 2 tokens"):
        sample_limit(ExtractionSettings(sample_budget_bytes=1024), 33, 4096)
    assert sample_limit(ExtractionSettings(), 33, 4096) == (1 << 30) // (33 * 4096 * 4) == 1985
