"""One naming scheme for hidden states: "emb", then 1..L."""

from __future__ import annotations

import pytest

from isoscope.engine.naming import hidden_state_label, hidden_state_names, parse_hidden_state


def test_hidden_state_names_keep_the_embeddings():
    assert hidden_state_names(3) == ["emb", "1", "2", "3"]
    assert [hidden_state_label(i) for i in range(4)] == hidden_state_names(3)


@pytest.mark.parametrize(
    ("label", "index"), [("emb", 0), ("Embeddings", 0), (0, 0), ("2", 2), (-1, 6), ("6", 6)]
)
def test_parse_hidden_state(label, index):
    assert parse_hidden_state(label, 6) == index


@pytest.mark.parametrize("label", ["7", "layer", -8, None])
def test_parse_hidden_state_rejects(label):
    with pytest.raises(ValueError):
        parse_hidden_state(label, 6)
