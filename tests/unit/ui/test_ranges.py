"""ui.ranges: the declarations parse link values, check their defaults, and are what links read."""

from __future__ import annotations

import pytest

from ui import links, ranges
from ui.ranges import Interval, Options


def test_options_parse_by_string_and_index_of_the_default():
    lengths = Options((16, 32, 64), 32)
    assert lengths.parse("64") == 64 and lengths.index == 1
    assert Options(("a", "b")).index == 0
    with pytest.raises(ValueError):
        lengths.parse("48")
    with pytest.raises(ValueError, match="not one of"):
        Options(("a",), "b")


def test_interval_parses_inside_its_bounds_only():
    seed = Interval(0, 10_000, 0, integer=True)
    assert seed.parse("42") == 42 and isinstance(seed.parse("42"), int)
    for bad in ("-1", "10001", "4.5", "x"):
        with pytest.raises(ValueError):
            seed.parse(bad)
    assert Interval(1.0, 8.0, 3.0, 0.5).parse("8") == 8.0
    with pytest.raises(ValueError, match="outside"):
        Interval(1.0, 8.0, 9.0)


def test_links_read_the_page_declarations():
    for page, controls in ranges.LINK_CONTROLS.items():
        assert links._controls(page) is controls
    assert links._controls("overview") == {}
    assert ranges.LINK_CONTROLS["layernorm"]["ln_k"] is ranges.LN_K
    assert ranges.post_options(include_none=False) == ranges.PROJ_POST.options
    assert "none" in ranges.ANISO_POST.options
