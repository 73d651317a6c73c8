"""isoscope.engine.store.cached_extract: a miss computed and kept, an unwritable folder or a
corrupted entry recomputed with at most one notice, and a key computed once across callers."""

from __future__ import annotations

import time

import numpy as np
import pytest

from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.engine.store.entries import cache_key
from tests.unit.engine.store.test_cache import fake_result

pytestmark = pytest.mark.usefixtures("no_process_limit")


def test_unwritable_folder_runs_with_one_notice(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = ResultCache(blocker / "cache")  # works as root too, unlike chmod
    calls = []

    def fake_extract(loaded, corpus, settings, progress):
        calls.append(1)
        return fake_result(0)

    loaded = type("L", (), {"fingerprint": "fp"})()
    corpus = type("C", (), {"sha": "s", "__len__": lambda self: 1})()
    import isoscope.engine.extraction

    monkeypatch.setattr(isoscope.engine.extraction, "extract", fake_extract)
    out = cached_extract(loaded, corpus, ExtractionSettings(), cache=cache)
    assert calls == [1]
    assert [n for n in out.notices if "nothing was cached" in n] == [out.notices[-1]]
    assert "cannot be written" in out.notices[-1] or "not writable" in out.notices[-1]
    assert ResultCache(tmp_path / "absent").usage().total == 0  # no folder: empty, no error


def test_corrupted_entry_is_recomputed_and_replaced(tmp_path, monkeypatch):
    import isoscope.engine.extraction

    cache = ResultCache(tmp_path)
    loaded = type("L", (), {"fingerprint": "fp"})()
    corpus = type("C", (), {"sha": "s", "__len__": lambda self: 1})()
    settings = ExtractionSettings()
    key = cache_key("fp", "s", settings)
    cache.path(key).write_bytes(b"PK\x03\x04 truncated garbage")
    monkeypatch.setattr(isoscope.engine.extraction, "extract", lambda *a: fake_result(5))
    out = cached_extract(loaded, corpus, settings, cache=cache)
    assert out.notices == ()
    np.testing.assert_array_equal(cache.load(key).sample_vectors, fake_result(5).sample_vectors)


def test_a_second_process_computing_the_same_key_waits_and_reads_the_first_result(
    tmp_path, monkeypatch
):
    """The key lock: while one caller (another process, here another cache object on the same
    folder in another thread) extracts a key, a second caller waits and then reads it from disk."""
    import threading

    import isoscope.engine.extraction

    calls: list[int] = []
    started = threading.Event()

    def slow_extract(*args):
        calls.append(1)
        started.set()
        time.sleep(0.5)
        return fake_result(7)

    monkeypatch.setattr(isoscope.engine.extraction, "extract", slow_extract)
    card = {"source": "fake"}  # the card fake_result carries: the same path, so no reuse line
    loaded = type("L", (), {"fingerprint": "fp", "info": type("I", (), {"to_dict": card.copy})})()
    corpus = type("C", (), {"sha": "s", "__len__": lambda self: 1})()
    out: dict[str, ExtractionResult] = {}
    first = threading.Thread(
        target=lambda: out.__setitem__(
            "a", cached_extract(loaded, corpus, cache=ResultCache(tmp_path))
        )
    )
    first.start()
    assert started.wait(10)
    out["b"] = cached_extract(loaded, corpus, cache=ResultCache(tmp_path))
    first.join(10)
    assert len(calls) == 1
    np.testing.assert_array_equal(out["a"].sample_vectors, out["b"].sample_vectors)
    assert out["b"].model == card  # read from the cache: the card names the same path, unchanged
