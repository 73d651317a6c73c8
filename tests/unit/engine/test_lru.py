"""isoscope.engine.lru: count and byte limits, recency, thread safety."""

from __future__ import annotations

import threading

import pytest

from isoscope.engine.lru import LRU


def test_count_limit_evicts_the_least_recently_used():
    lru = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the newest
    lru.put("c", 3)
    assert lru.keys() == ["a", "c"]
    assert lru.get("b") is None
    assert lru.get("b", "missing") == "missing"
    assert "a" in lru and len(lru) == 2


def test_put_again_refreshes_and_replaces():
    lru = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    lru.put("a", 10)
    lru.put("c", 3)
    assert lru.keys() == ["a", "c"]
    assert lru.get("a") == 10


def test_byte_limit_keeps_the_newest_item_whatever_it_weighs():
    lru = LRU(10, max_bytes=10, weigh=len)
    lru.put("a", b"x" * 4)
    lru.put("b", b"x" * 4)
    assert lru.keys() == ["a", "b"]
    lru.put("c", b"x" * 4)  # 12 > 10: the oldest goes
    assert lru.keys() == ["b", "c"]
    lru.put("huge", b"x" * 100)  # alone over the limit, still kept
    assert lru.keys() == ["huge"]


def test_limits_are_checked():
    with pytest.raises(ValueError, match="at least one"):
        LRU(0)
    with pytest.raises(ValueError, match="weigh"):
        LRU(2, max_bytes=10)


def test_clear():
    lru = LRU(2)
    lru.put("a", 1)
    lru.clear()
    assert len(lru) == 0 and lru.get("a") is None


def test_concurrent_puts_and_gets_keep_the_limit():
    lru = LRU(8, max_bytes=8 * 16, weigh=len)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(500):
                lru.put((worker, i % 20), b"x" * 16)
                lru.get((worker, (i + 7) % 20))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(lru) <= 8
