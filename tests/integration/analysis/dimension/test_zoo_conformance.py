"""The dimension card on every text family of both zoos (tests/zoo.py, tests/zoo_recent.py): tiny
random checkpoints saved with a tokenizer and loaded through the real loader, a basis dimension
at a middle state and at the last state, without ablation. Per family and state the card is
built or refused in one line (an IsoscopeError whose message names the structure), its numbers
are finite, and its parts (embeddings, mixers or heads, MLPs or experts, norm biases) sum to the
value on every token within float tolerance.

Refused, and why that is acceptable (each is a structure the per-layer sum does not describe, so
a card would show wrong numbers): ALBERT runs one shared layer module L times, so no contribution
can be told apart per layer; Gemma 3n (AltUp) passes several parallel copies of the residual
stream between its blocks, mixed by learned predict and correct steps, and its hidden state is one
of them, so it is not the embeddings plus what the blocks add to it. Every other family of both
zoos is read, the sum checked."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from isoscope.engine.errors import IsoscopeError
from tests import zoo, zoo_recent

TEXTS = ["the cat sat on the w3 . w7", "a dog , the w1 w2 sat !", "the w4 ."]
D = 3
# family -> what its one line must say
REFUSED = {"albert": "share one module", "gemma3n_text": "parallel streams"}
FAMILIES = [("zoo", f) for f in zoo.TEXT_FAMILIES] + [("recent", f) for f in zoo_recent.FAMILIES]


def _finite(x) -> bool:
    return x is None or bool(np.isfinite(x))


@pytest.mark.slow
@pytest.mark.parametrize(("which", "family"), FAMILIES, ids=[f"{w}-{f}" for w, f in FAMILIES])
def test_the_card_opens_or_refuses_in_one_line(which, family, tmp_path):
    from isoscope.engine.load.models import load_model

    module = zoo if which == "zoo" else zoo_recent
    loaded = load_model(str(module.build(family, tmp_path / family)), device="cpu")
    last = int(loaded.info.num_layers)
    for state in sorted({last // 2, last}):
        settings = DimensionSettings(state=state, dim=D, ablation_texts=0, top_k=3)
        try:
            card = dimension_card(loaded, TEXTS, settings)
        except IsoscopeError as exc:
            line = str(exc)
            assert family in REFUSED, f"{family} state {state} refused: {line}"
            assert REFUSED[family] in line and "\n" not in line
            continue
        assert family not in REFUSED, f"{family} is read now: take it off REFUSED"
        assert card.n_tokens > 0 and card.contributions
        assert np.isfinite(card.values).all()
        for row in card.contributions:
            for key in ("mean", "first_position", "other_positions", "at_top"):
                assert _finite(row[key]), (family, state, row)
        for row in card.by_state:
            assert all(_finite(row[k]) for k in ("mean", "mean_abs", "max_abs")), row
        for reader in card.readers:
            assert _finite(reader["gamma"]) and _finite(reader["beta"]), reader
        assert all(_finite(t["value"]) for t in card.top_tokens)
        assert np.isfinite(card.sum_check) and np.isfinite(card.value_scale)
        assert card.sum_check <= 1e-5 * max(card.value_scale, 1.0), (family, state)
