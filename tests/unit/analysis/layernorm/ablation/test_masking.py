"""MLM masking for the ablation's loss: seeded, never a special token, about 15 % of the rest."""

from __future__ import annotations

import numpy as np

from isoscope.analysis.layernorm.ablation.masking import mask_tokens
from isoscope.engine.extraction import TokenizedCorpus


def test_mask_tokens_skips_specials_and_is_seeded():
    ids = [np.arange(100, 100 + n) for n in (40, 3, 60)]
    special = [np.r_[True, np.zeros(n - 2, bool), True] for n in (40, 3, 60)]
    tok = TokenizedCorpus(ids, special, [np.zeros(len(i), np.int32) for i in ids], 0, 128)
    masked = mask_tokens(tok, mask_token_id=1, seed=0)
    for m, lab, sp, orig in zip(masked.input_ids, masked.labels, special, ids, strict=True):
        chosen = lab >= 0
        assert not (chosen & sp).any() and chosen.sum() >= 1
        assert (
            (m[chosen] == 1).all()
            and (lab[chosen] == orig[chosen]).all()
            and (m[~chosen] == orig[~chosen]).all()
        )
    share = masked.num_masked / sum((~s).sum() for s in special)
    assert 0.05 < share < 0.3
    again = mask_tokens(tok, mask_token_id=1, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(masked.labels, again.labels, strict=True))


def test_a_tokenizer_without_a_mask_token_is_an_input_error():
    from types import SimpleNamespace

    import pytest

    from isoscope.analysis.layernorm.ablation.masking import mask_token_id
    from isoscope.engine.errors import InputError

    assert mask_token_id(SimpleNamespace(tokenizer=SimpleNamespace(mask_token_id=103))) == 103
    with pytest.raises(InputError, match="no mask token"):
        mask_token_id(SimpleNamespace(tokenizer=SimpleNamespace(mask_token_id=None)))
