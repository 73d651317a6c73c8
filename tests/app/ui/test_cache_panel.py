"""AppTest of the sidebar's disk-cache section: use against the limit, clear, and a limit below one
result (the analysis is shown, nothing is kept, one notice on the page)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.store.limit import set_process_limit
from isoscope.ui.frame.selection import Selection
from isoscope.ui.frame.session import SELECTION_KEY

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TINY = "random:bert:layers=2,width=32,heads=2,seed=3"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(folder))
    monkeypatch.delenv("ISOSCOPE_CACHE_LIMIT", raising=False)
    set_process_limit(None)
    yield folder
    set_process_limit(None)


def _app(text: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[SELECTION_KEY] = Selection(
        model_source=TINY, device="cpu", corpus_kind="paste", corpus_text=text
    )
    at.run()
    assert not at.exception
    return at


def _cache_line(at: AppTest) -> str:
    texts = [p.proto.text for p in at.sidebar.get("progress")]
    return next(t for t in texts if t.startswith("Disk cache: "))


def test_panel_shows_use_and_clears(cache_dir):
    at = _app("A cat sat on the mat.\nThe river bank was muddy.\nRates rose.")
    assert len(list(cache_dir.glob("*.npz"))) == 1
    assert _cache_line(at).endswith(" of 5 GiB")
    assert not [c for c in at.caption if "nothing was cached" in c.value]
    at.button(key="sb_cache_clear").click().run()
    assert not at.exception
    assert not list(cache_dir.glob("*.npz"))
    assert any("Cleared 1 cached analyses" in s.value for s in at.sidebar.success)
    assert _cache_line(at) == "Disk cache: 0 of 5 GiB"


def test_limit_below_one_result_shows_it_and_keeps_nothing(cache_dir):
    at = _app("First corpus, first line.\nSecond line.")
    assert len(list(cache_dir.glob("*.npz"))) == 1
    at.number_input(key="sb_cache_limit_gib").set_value(0.0).run()
    assert not list(cache_dir.glob("*.npz"))  # the lowered limit applied at once
    at.session_state[SELECTION_KEY] = Selection(
        model_source=TINY, device="cpu", corpus_kind="paste", corpus_text="Another corpus.\nYes."
    )
    at.run()
    assert not at.exception and not at.error
    assert [t.value for t in at.title] == ["Overview"]
    notices = [c.value for c in at.caption if "nothing was cached" in c.value]
    assert len(notices) == 1 and "0 B" in notices[0]
    assert not list(cache_dir.glob("*.npz"))


def test_in_memory_stores_are_the_one_bounded_lru():
    """Every in-memory store of the UI is isoscope.engine.lru.LRU (tested in
    tests/unit/engine/test_lru.py) with its own limits."""
    from isoscope.engine.lru import LRU
    from isoscope.ui.sharing import exports as share
    from isoscope.ui.sharing import saved
    from isoscope.ui.work import corpora, extraction

    results = extraction._extraction_store()
    assert isinstance(results, LRU)
    assert (results.size, results.max_bytes) == (4, extraction.RESULTS_IN_MEMORY_BYTES)
    uploads = corpora._uploaded_store()
    assert (uploads.size, uploads.max_bytes) == (8, 200 << 20)
    assert uploads.weigh(("name.txt", b"x" * 30)) == 30
    assert isinstance(extraction._memo_store(), LRU) and extraction._memo_store().size == 256
    assert saved._store().size == saved.STORE_SIZE
    assert share._full_reports().size == share.MAX_REPORTS


def test_sample_budget_from_the_sidebar_reaches_the_settings_and_the_page(cache_dir):
    at = _app("One line of text here.\nAnother line of text.\nA third one.")
    at.select_slider(key="sb_sample_budget").set_value("256 MiB").run()
    assert any("sample within 256 MiB" in i.value for i in at.sidebar.info)
    at.button(key="sb_run").click().run()
    assert not at.exception
    assert at.session_state[SELECTION_KEY].settings.sample_budget_bytes == 256 * 1024**2
    # A budget that binds (3 states x 32 dims x 4 bytes = 384 B per token): the page says so.
    at.session_state[SELECTION_KEY] = Selection(
        model_source=TINY,
        device="cpu",
        corpus_kind="paste",
        corpus_text="One line of text here.\nAnother line of text.",
        settings=ExtractionSettings(sample_budget_bytes=4096),
    )
    at.run()
    assert not at.exception and not at.error
    assert any("10 tokens per state to stay within 4 KiB" in c.value for c in at.caption)


def test_get_extraction_goes_through_cached_extract(cache_dir, monkeypatch):
    """Memory first, then isoscope.engine.store.cached_extract.cached_extract: a run gets the progress bar, a disk
    hit (memory emptied, as after a restart) gets none and runs no extraction."""
    from isoscope.engine.store import cached_extract as cached_module
    from isoscope.ui.work import extraction

    calls: list[bool] = []

    def recording(loaded, corpus, settings=None, progress=None, cache=None):
        calls.append(progress is not None)
        return cached_module.cached_extract(loaded, corpus, settings, progress, cache=cache)

    monkeypatch.setattr(extraction, "cached_extract", recording)
    # the Overview's first look on a device with no recorded speed extracts through its own path
    # (tests/app/pages/test_overview.py); this test is about the page's extraction
    monkeypatch.setattr("isoscope.ui.views.overview.first_look_plan", lambda: None)
    text = "Only this test uses this corpus.\nA second line of it."
    _app(text)
    assert calls == [True]  # extracted, with a progress bar
    _app(text)
    assert calls == [True]  # this process's memory: cached_extract not called again
    extraction._extraction_store().clear()

    def boom(*args, **kwargs):
        raise AssertionError("extracted although the disk cache holds the result")

    monkeypatch.setattr("isoscope.engine.extraction.extract", boom)
    _app(text)
    assert calls == [True, False]  # the disk hit, without a bar
