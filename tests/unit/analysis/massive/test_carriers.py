"""The carriers of massive activations in a text (Sun et al. 2024): delimiters, and the count of
planted massive activations by carrier, dim and token."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.massive.carriers import (
    CARRIERS,
    count_carriers,
    is_delimiter,
    text_carrier,
)


@pytest.mark.parametrize(
    ("token", "expected"),
    [(".", True), ("Ġ,", True), ("Ċ", True), ("<0x0A>", True), ("ĠĊ", True), ("Ġcat", False)],
)
def test_delimiters(token, expected):
    assert is_delimiter(token) is expected


def test_the_first_position_then_delimiters_carry():
    assert text_carrier(0, ".") == "first"
    assert text_carrier(3, ".") == "delimiter" and text_carrier(3, "Ġcat") == "other"


def test_massive_activations_are_counted_by_carrier_dim_and_token():
    """Rows (state, dim, text, position, token id): state 1 holds a first token twice in dim 7 and
    a '.' in dim 3; state 0 none."""
    rows = np.array([[1, 7, 0, 0, 0], [1, 7, 1, 0, 0], [1, 3, 1, 5, 1]], dtype=np.int64)
    calls = []

    def vocab(ids):
        calls.append(ids)
        return [{0: "The", 1: "."}[i] for i in ids]

    out = count_carriers(rows, 2, vocab)
    assert out[0] == dict.fromkeys(CARRIERS, 0) | {"dims": [], "tokens": []}
    assert (out[1]["first"], out[1]["delimiter"], out[1]["other"]) == (2, 1, 0)
    assert out[1]["dims"] == [[7, 2], [3, 1]] and out[1]["tokens"] == [["The", 2], [".", 1]]
    assert len(calls) == 2  # each token id is looked up once
