"""The logit lens of the card against an independent computation: at the last state (already the
final norm's output) of a decoder with tied embeddings, the tokens a dimension promotes are the
largest entries of sign(mean value) * W_U[:, d]."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from tests import zoo
from tests.dimension_models import TEXTS
from tests.dimension_models import load_tiny as _load


@pytest.mark.parametrize("dim", [0, 5, 17])
def test_promoted_tokens_follow_the_unembedding(tmp_path, dim):
    loaded = _load(tmp_path, zoo, "llama", tie_word_embeddings=True)
    state = loaded.info.num_layers
    card = dimension_card(
        loaded, TEXTS, DimensionSettings(state=state, dim=dim, ablation_texts=0, top_k=4)
    )
    w_u = loaded.model.get_input_embeddings().weight.detach().numpy()
    expected = np.argsort(-np.sign(card.values.mean()) * w_u[:, dim], kind="stable")[:4]
    assert [t["id"] for t in card.logit_effect["promotes"]] == expected.tolist()
    assert card.logit_effect["promotes"][0]["mean"] >= card.logit_effect["suppresses"][0]["mean"]


def test_encoders_have_no_logit_effect(tmp_path):
    loaded = _load(tmp_path, zoo, "bert")
    card = dimension_card(loaded, TEXTS, DimensionSettings(state=1, dim=3, ablation_texts=0))
    assert card.logit_effect is None and not card.is_decoder
