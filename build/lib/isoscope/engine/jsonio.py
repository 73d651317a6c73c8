"""Strict JSON for every file isoscope writes (CLI outputs, downloads, reports): numpy scalars and
arrays become Python values and NaN / inf become ``null``, so any JSON parser reads the result
(Python's ``json.dumps`` would otherwise write the bare ``NaN`` token, which is not JSON)."""

from __future__ import annotations

import json
import math
from typing import Any


def to_jsonable(value: Any) -> Any:
    """numpy scalars/arrays to Python; NaN and inf to None; tuples to lists; keys to strings."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def strict_json(value: Any, **dumps_kwargs: Any) -> str:
    """``json.dumps`` of :func:`to_jsonable` ``(value)``; raises rather than write a NaN token."""
    return json.dumps(to_jsonable(value), allow_nan=False, **dumps_kwargs)
