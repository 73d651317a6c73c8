"""The one padding helper every forward pass over token ids uses (pad_batch)."""

from __future__ import annotations

import numpy as np

from backend.engine.extraction.forward import pad_batch
from backend.engine.extraction.tokenization import TokenizedCorpus


def _tokenized(*lengths: int) -> TokenizedCorpus:
    ids = [np.arange(1, n + 1, dtype=np.int64) for n in lengths]
    special = [np.zeros(n, dtype=bool) for n in lengths]
    words = [np.arange(n, dtype=np.int32) for n in lengths]
    return TokenizedCorpus(ids, special, words, 0, max(lengths))


def test_pad_batch_right_pads_the_chosen_texts_with_the_pad_id():
    tokenized = _tokenized(3, 1, 2)
    ids, mask = pad_batch(tokenized, np.array([2, 1]), pad_id=-7)
    np.testing.assert_array_equal(ids, [[1, 2], [1, -7]])
    np.testing.assert_array_equal(mask, [[1, 1], [1, 0]])
    assert ids.dtype == mask.dtype == np.int64


def test_pad_batch_of_no_texts_is_empty():
    ids, mask = pad_batch(_tokenized(2), np.array([], dtype=np.int64), pad_id=0)
    assert ids.shape == mask.shape == (0, 0)
