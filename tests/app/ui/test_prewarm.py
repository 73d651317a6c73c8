"""The server's prewarm fills the caches the sessions use: after it ran (outside any session, as
in ``isoscope serve``), a visitor's Overview runs no extraction and no report section."""

from __future__ import annotations

import threading
from pathlib import Path

from streamlit.testing.v1 import AppTest

from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.server import prewarm

APP = str(Path(__file__).resolve().parents[3] / "app.py")
SOURCE = "random:bert:layers=2,width=32,heads=2,seed=21"


def test_default_selection_is_the_sidebars(monkeypatch):
    assert prewarm.default_selection("default").settings.exclude_first is False
    assert prewarm.default_selection("random:gpt2").settings.exclude_first is True


def test_after_the_prewarm_the_first_page_computes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    done: list[float] = []
    worker = threading.Thread(  # no Streamlit session, as in the server process
        target=lambda: done.append(prewarm.prewarm_overview(SOURCE, full_report=False))
    )
    worker.start()
    worker.join(300)
    assert done and done[0] > 0

    def boom(*args, **kwargs):
        raise AssertionError("computed again although the prewarm did it")

    monkeypatch.setattr("isoscope.engine.extraction.extract", boom)
    monkeypatch.setattr("isoscope.ui.sharing.exports.build_report", boom)
    monkeypatch.setattr("isoscope.ui.work.results.anisotropy_by_state", boom)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[SELECTION_KEY] = prewarm.default_selection(SOURCE)
    at.run()
    assert not at.exception
    assert [t.value for t in at.title][:1] == ["Overview"]
