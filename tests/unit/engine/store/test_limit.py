"""isoscope.engine.store.limit: sizes read and written in binary units, and which limit applies
(an explicit one, the process's, the environment's, the default)."""

from __future__ import annotations

import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.limit import (
    DEFAULT_CACHE_LIMIT,
    default_cache_limit,
    format_usage,
    parse_size,
    set_process_limit,
)

MIB = 1024**2

pytestmark = pytest.mark.usefixtures("no_process_limit")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("500M", 500 * MIB),
        ("5G", 5 * 1024**3),
        ("5GiB", 5 * 1024**3),
        ("1.5g", int(1.5 * 1024**3)),
        ("800MB", 800 * MIB),
        ("64k", 64 * 1024),
        ("1T", 1024**4),
        ("12345", 12345),
        (" 0 ", 0),
        (7, 7),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "5X", "-1G", "1..5G", "G5"])
def test_parse_size_rejects_with_an_example(text):
    with pytest.raises(InputError, match="such as 500M or 5G"):
        parse_size(text)


def test_format_usage_in_the_limit_unit():
    assert format_usage(int(1.2 * 1024**3), 5 * 1024**3) == "1.2 of 5 GiB"
    assert format_usage(3 * MIB, 64 * MIB) == "3 of 64 MiB"
    assert format_usage(0, 5 * 1024**3) == "0 of 5 GiB"
    assert format_usage(40 * MIB, 5 * 1024**3) == "40 MiB of 5 GiB"


def test_limit_precedence(monkeypatch, tmp_path):
    assert default_cache_limit() == DEFAULT_CACHE_LIMIT == 5 * 1024**3
    monkeypatch.setenv("ISOSCOPE_CACHE_LIMIT", "2G")
    assert ResultCache(tmp_path).limit == 2 * 1024**3
    set_process_limit("300M")  # the sidebar / --cache-limit beats the env var
    assert ResultCache(tmp_path).limit == 300 * MIB
    assert ResultCache(tmp_path, limit="1M").limit == MIB  # an explicit limit beats both
    monkeypatch.setenv("ISOSCOPE_CACHE_LIMIT", "lots")
    set_process_limit(None)
    with pytest.raises(InputError, match="ISOSCOPE_CACHE_LIMIT"):
        default_cache_limit()
    with pytest.raises(InputError, match="ISOSCOPE_CACHE_LIMIT"):
        ResultCache(tmp_path)  # before any work, not after the extraction
    assert ResultCache(tmp_path, limit="1G").limit == 1024**3  # an explicit limit needs no env
