"""The extraction's records without a model: the settings' ranges and messages, and the token table."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.extraction.types import ExtractionSettings, TokenTable


def test_settings_defaults_and_to_dict():
    s = ExtractionSettings()
    assert (s.max_length, s.batch_size, s.sample_size, s.seed) == (128, 32, 8000, 0)
    assert s.to_dict()["token_budget"] == 8192 and s.to_dict()["sample_budget_bytes"] == 1 << 30
    assert ExtractionSettings(**s.to_dict()) == s
    assert hash(ExtractionSettings(seed=1)) != hash(s)  # part of a cache key


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_length": 1}, "max length must be between 2 and 8192 tokens, got 1"),
        ({"max_length": 8193}, "max length"),
        ({"batch_size": 0}, "batch size must be between 1 and 4096, got 0"),
        ({"sample_size": 1}, "sample size must be between 2 and 1,000,000 tokens, got 1"),
        ({"token_budget": 0}, "token budget must be between 1 and 16,777,216"),
        ({"sample_budget_bytes": 1023}, "between 1 KiB and 1 TiB, got 1,023 bytes"),
    ],
)
def test_settings_out_of_range_are_input_errors_that_say_the_range(options, message):
    with pytest.raises(InputError, match=message):
        ExtractionSettings(**options)


def test_settings_at_the_range_ends_are_accepted():
    ExtractionSettings(max_length=2, batch_size=4096, sample_size=1_000_000, token_budget=1)
    ExtractionSettings(max_length=8192, sample_budget_bytes=1 << 10)


def _table() -> TokenTable:
    return TokenTable(
        text_id=np.array([0, 0, 0, 1, 1], dtype=np.int32),
        position=np.array([0, 1, 2, 0, 1], dtype=np.int32),
        token=np.array(["[CLS]", "hi", ",", "[CLS]", "[SEP]"]),
        word_id=np.array([-1, 0, 1, -1, -1], dtype=np.int32),
        is_special=np.array([True, False, False, True, True]),
        is_punct=np.array([False, False, True, False, False]),
    )


def test_token_table_take_and_categories():
    table = _table()
    assert len(table) == 5
    part = table.take(np.array([1, 4]))
    assert part.token.tolist() == ["hi", "[SEP]"] and part.text_id.tolist() == [0, 1]
    assert table.category().tolist() == [
        "position 0",
        "other",
        "punctuation",
        "position 0",
        "special",
    ]
    frame = table.to_frame()
    assert list(frame.columns) == list(TokenTable.__dataclass_fields__) and len(frame) == 5
