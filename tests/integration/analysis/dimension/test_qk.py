"""The query-key share on planted attention layers: queries and keys that read nothing but the
dimension put all of every head's logit on it (share 1); queries and keys blind to it put none
(share 0). On Llama (grouped-query heads) and BERT (post-norm, biased projections, zeroed)."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from isoscope.engine.arch import architecture
from tests import zoo
from tests.dimension_models import TEXTS, D, load_tiny


@pytest.mark.parametrize("family", ["llama", "bert"])
@pytest.mark.parametrize("only", [True, False])
def test_planted_query_key_share(tmp_path, family, only):
    loaded = load_tiny(tmp_path, zoo, family)
    layer = architecture(loaded).layers[0]
    with torch.no_grad():
        for proj in (layer.query, layer.key):
            if only:
                kept = proj.weight[:, D].clone()
                proj.weight.zero_()
                proj.weight[:, D] = kept
            else:
                proj.weight[:, D] = 0.0
            if getattr(proj, "bias", None) is not None:
                proj.bias.zero_()
    card = dimension_card(loaded, TEXTS, DimensionSettings(state=1, dim=D, ablation_texts=0))
    first = [r for r in card.qk_share if r["layer"] == 1]
    assert len(first) == loaded.model.config.num_attention_heads
    expected = 1.0 if only else 0.0
    assert all(r["share"] == pytest.approx(expected, abs=1e-5) for r in first)
    assert any(r["layer"] == 2 for r in card.qk_share)
