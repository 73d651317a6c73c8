"""ui/widgets/dimension_card.py: the card's sections, drawn from a computed card on a tiny
encoder and a tiny decoder, with and without an ablation, twice on one page under two key
prefixes (the dimension page's and the SAE page's) without a widget clash."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from tests.app.charts import charts
from tests.dimension_models import TEXTS, D

SECTIONS = ("Where it shows", "What writes it", "What reads it", "What it does")


def _two_cards(card) -> None:
    from isoscope.ui.widgets import dimension_card as sections

    sections.sections(card)
    sections.sections(card, key="sae_card", file_name="feature.json")


@pytest.mark.parametrize("ablation_texts", [0, 2])
@pytest.mark.parametrize("fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_two_cards_draw_every_section_under_their_own_keys(request, fixture, ablation_texts):
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(request.getfixturevalue(fixture)), device="cpu")
    settings = DimensionSettings(state=1, dim=D, offset=0.5, ablation_texts=ablation_texts,
                                 controls=1, label="feature 3")  # fmt: skip
    card = dimension_card(loaded, TEXTS, settings)
    at = AppTest.from_function(_two_cards, args=(card,), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    headers = [h.value for h in at.subheader]
    for title in SECTIONS:
        assert headers.count(title) == 2, headers
    keys = {c.key for c in charts(at)}
    for prefix in ("dim", "sae_card"):
        assert {f"{prefix}_by_state", f"{prefix}_hist", f"{prefix}_contributions"} <= keys
    assert [r.key for r in at.radio] == ["dim_statistic", "sae_card_statistic"]
    labels = [m.label for m in at.metric]
    assert labels.count("Mean of feature 3 at state 1") == 2
    assert any("Ablation" in m.value for m in at.markdown) == bool(ablation_texts)
    logit = any("Direct effect on the logits" in m.value for m in at.markdown)
    assert logit == (fixture == "tiny_gpt2_dir")  # the decoder's direct effect on the logits
