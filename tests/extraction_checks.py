"""Inputs and checks of the extraction tests (tests/integration/engine/): a few varied texts, each
text encoded alone, and "two extraction results are the same"."""

from __future__ import annotations

import numpy as np

from isoscope.engine.extraction import TokenTable, encode_text

TEXTS = (
    "The bank raised its interest rates again.",
    "We sat on the river bank, watching the water.",
    "Short one.",
    "A much longer sentence, with commas, punctuation; and several clauses that go on for a while!",
    "Tokens: [brackets], (parens) & symbols?",
    "Why?",
)


def direct(loaded, texts, exclude_special=False):
    """Token vectors (S, n, d) float64 of every text run alone (no padding), in text order."""
    parts, tables = [], []
    for text in texts:
        hidden, table = encode_text(loaded, text)
        keep = ~table.is_special if exclude_special else np.ones(len(table), dtype=bool)
        parts.append(hidden[:, keep].astype(np.float64))
        tables.append(table.take(np.flatnonzero(keep)))
    return np.concatenate(parts, axis=1), tables


_STATS = ("mean", "variance", "min", "max", "mean_abs")


def assert_same_result(a, b, rtol=1e-12, atol=1e-12):
    for name in _STATS:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=rtol, atol=atol)
    np.testing.assert_array_equal(a.sample_index, b.sample_index)
    for f in TokenTable.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(a.tokens, f), getattr(b.tokens, f), err_msg=f)
