"""The model card rows: the Hub revision appears exactly when a Hub commit was loaded."""

from __future__ import annotations

import pytest

from backend.plots.overview import model_card_rows

pytestmark = pytest.mark.unit


def test_the_card_names_the_hub_revision_only_for_hub_models():
    card = {"display_name": "org/name", "num_parameters": 2_500_000, "is_causal": True}
    fields = {row["field"]: row["value"] for row in model_card_rows(card)}
    assert "Hub revision" not in fields and fields["parameters"] == "2.5 M"
    rows = model_card_rows({**card, "revision": "a" * 40})
    assert rows[-1] == {"field": "Hub revision", "value": "a" * 40}
