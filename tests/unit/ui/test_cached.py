"""The page caches' keys: cheap, hashable stand-ins for their arguments (never whole arrays)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from isoscope.engine.extraction import TokenTable
from isoscope.ui.work.cached import _key_of
from isoscope.ui.work.extraction import result_key
from tests.synthetic import result_from_vectors


def test_plain_values_and_containers():
    assert _key_of(3) == 3 and _key_of("x") == "x" and _key_of(None) is None
    assert _key_of([1, (2, "a")]) == (1, (2, "a"))
    assert _key_of({"b": 1, "a": [2]}) == (("a", (2,)), ("b", 1))
    hash(_key_of({"b": 1, "a": [2, {"c": 3}]}))  # hashable all the way down


def test_a_dataclass_is_keyed_by_its_type_and_repr():
    @dataclasses.dataclass(frozen=True)
    class Options:
        k: float = 3.0

    assert _key_of(Options()) == ("Options", repr(Options()))
    assert repr(Options()).endswith("Options(k=3.0)")
    assert _key_of(Options(2.0)) != _key_of(Options())


def test_an_extraction_result_is_keyed_by_its_result_key():
    n = 20
    tokens = TokenTable(
        text_id=np.repeat(np.arange(4), 5).astype(np.int32),
        position=np.tile(np.arange(5), 4).astype(np.int32),
        token=np.array([f"t{i}" for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.zeros(n, dtype=bool),
        is_punct=np.zeros(n, dtype=bool),
    )
    result = result_from_vectors(np.random.default_rng(0).normal(size=(2, n, 4)), tokens)
    assert _key_of(result) == ("result", result_key(result))
    assert _key_of([result, 1]) == (("result", result_key(result)), 1)


def test_arrays_are_refused():
    with pytest.raises(TypeError, match="not cheap cache keys"):
        _key_of(np.zeros(3))
    with pytest.raises(TypeError):
        _key_of({"x": np.zeros(3)})
