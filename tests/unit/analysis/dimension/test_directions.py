"""Directions besides a basis dimension: the mean direction and principal components, checked on
planted clouds."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.dimension.directions import mean_direction, principal_direction
from isoscope.engine.errors import InputError


def test_mean_direction_is_the_unit_mean():
    u = mean_direction(np.array([3.0, 4.0, 0.0]))
    assert np.allclose(u, [0.6, 0.8, 0.0])
    with pytest.raises(InputError):
        mean_direction(np.zeros(3))


@pytest.mark.parametrize("axis", [0, 3, 7])
def test_first_principal_component_finds_a_planted_axis(axis):
    rng = np.random.default_rng(axis)
    x = rng.normal(size=(500, 8)) * 0.1
    x[:, axis] += rng.normal(size=500) * 5 + 1.0
    u = principal_direction(x, 1)
    assert abs(u[axis]) > 0.99
    assert (x @ u).mean() >= 0  # the sign makes the mean projection non-negative


@pytest.mark.parametrize("k", [0, 9])
def test_a_component_that_does_not_exist_is_refused(k):
    with pytest.raises(InputError):
        principal_direction(np.ones((20, 8)), k)
