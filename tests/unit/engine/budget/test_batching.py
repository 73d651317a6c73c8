"""The one batching rule's padded tokens (backend/engine/budget/batching.py); the batches themselves are
tested with the tokenization (tests/unit/engine/extraction/test_tokenization.py)."""

from __future__ import annotations

from isoscope.engine.budget.batching import Batching, padded_tokens
from isoscope.engine.params import BATCH_SIZE, TOKEN_BUDGET

BATCHING = Batching(batch_size=4, token_budget=10**6)


def test_padded_tokens_are_the_batches_longest_text_times_their_texts():
    # longest first, 4 a batch: (50, 10, 10, 10) runs 4 x 50, (10, 10) 2 x 10
    assert padded_tokens([10, 10, 50, 10, 10, 10], BATCHING) == 4 * 50 + 2 * 10
    assert padded_tokens([7] * 8, BATCHING) == 56  # equal lengths: no padding
    # the token budget cuts a batch at 3 texts of 50 (150 padded tokens); the last 50 then
    # leads a batch with both 10s, which run at its width
    assert padded_tokens([50] * 4 + [10] * 2, Batching(4, 150)) == 3 * 50 + 3 * 50


def test_the_default_batching_is_the_declared_settings():
    assert Batching.of() == Batching(BATCH_SIZE.default, TOKEN_BUDGET.default)
