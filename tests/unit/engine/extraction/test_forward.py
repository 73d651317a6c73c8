"""The one padding helper every forward pass over token ids uses (pad_batch)."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.extraction.forward import pad_batch
from isoscope.engine.extraction.tokenization import TokenizedCorpus


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


def test_a_failed_cpu_extraction_still_hands_freed_memory_back(tiny_bert_dir, monkeypatch):
    """The allocator keeps freed memory only while an extraction runs: an error mid-run (here a
    model that returns no hidden states) releases it too, and the error still reaches the caller."""
    import isoscope.engine.extraction.forward as forward
    from isoscope.engine.errors import UnsupportedModelError
    from isoscope.engine.extraction import extract
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.load.models import load_model

    released = []
    monkeypatch.setattr(forward, "release_freed_memory", lambda: released.append(1))
    loaded = load_model(str(tiny_bert_dir))
    corpus = Corpus(("one small text", "and another one"), "t")
    extract(loaded, corpus)
    assert released == [1]

    def broken(*args, **kwargs):
        raise UnsupportedModelError("returns no hidden states")

    monkeypatch.setattr(forward, "forward_hidden_states", broken)
    with pytest.raises(UnsupportedModelError):
        extract(loaded, corpus)
    assert released == [1, 1]
