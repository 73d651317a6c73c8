"""DimensionSettings and read_direction refuse bad input with one clear message."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.dimension.settings import DimensionSettings, read_direction
from isoscope.engine.errors import InputError


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"dim": 3, "direction": np.ones(4)},
        {"dim": -1},
        {"dim": 3, "top_k": 0},
        {"dim": 3, "controls": 500},
        {"direction": np.zeros(4)},
        {"direction": np.ones((2, 2))},
        {"direction": np.array([1.0, np.nan])},
        {"dim": 3, "offset": float("inf")},
    ],
)
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(InputError):
        DimensionSettings(state=1, **kwargs)


def test_vector_checks_the_width():
    assert DimensionSettings(state=0, dim=2).vector(4).tolist() == [0, 0, 1, 0]
    with pytest.raises(InputError, match="does not exist"):
        DimensionSettings(state=0, dim=4).vector(4)
    with pytest.raises(InputError, match="length 5"):
        DimensionSettings(state=0, direction=np.ones(4)).vector(5)


def test_read_direction(tmp_path):
    good = tmp_path / "u.npy"
    np.save(good, np.arange(4.0)[None])
    assert read_direction(good).tolist() == [0, 1, 2, 3]
    matrix = tmp_path / "m.npy"
    np.save(matrix, np.ones((2, 3)))
    pickled = tmp_path / "p.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for bad in (matrix, pickled, tmp_path / "missing.npy", tmp_path / "u.txt"):
        with pytest.raises(InputError):
            read_direction(bad)
