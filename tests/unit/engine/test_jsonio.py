"""Strict JSON: NaN and inf become null, numpy values become Python ones, and no NaN token is
ever written (a parser that refuses NaN reads every output)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from backend.engine.jsonio import strict_json, to_jsonable


def _refuse(token: str):
    raise ValueError(token)


def test_nan_and_inf_become_null_everywhere():
    payload = {
        "a": float("nan"),
        "b": [1.0, float("inf"), -float("inf")],
        "c": np.array([0.5, np.nan], dtype=np.float32),
        "d": (np.float64("nan"), np.int64(3)),
        4: {"nested": np.float32(np.inf)},
    }
    text = strict_json(payload)
    parsed = json.loads(text, parse_constant=_refuse)
    assert parsed == {
        "a": None,
        "b": [1.0, None, None],
        "c": [0.5, None],
        "d": [None, 3],
        "4": {"nested": None},
    }


def test_numpy_scalars_and_arrays_become_python_values():
    value = to_jsonable({"x": np.arange(3), "y": np.bool_(True), "z": np.float32(0.25)})
    assert value == {"x": [0, 1, 2], "y": True, "z": 0.25}
    assert type(value["x"][0]) is int and type(value["z"]) is float


def test_plain_json_dumps_would_have_written_nan():
    """The reason for the helper: the standard library writes a bare NaN token."""
    assert "NaN" in json.dumps({"a": math.nan})
    with pytest.raises(ValueError):
        json.loads(json.dumps({"a": math.nan}), parse_constant=_refuse)
    assert "NaN" not in strict_json({"a": math.nan})


def test_dumps_options_pass_through():
    assert strict_json({"b": 1, "a": 2}, sort_keys=True, indent=1) == '{\n "a": 2,\n "b": 1\n}'
