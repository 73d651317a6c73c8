"""Identical work runs once on a shared server: two sessions (AppTests in two threads) opening the
same selection at the same time run one extraction and get the same result object; a failure
reaches both as the same message, and the next request retries."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import backend.engine.extraction as extraction
from backend.engine.errors import InputError
from ui.common import Selection
from ui.session import SELECTION_KEY

APP = str(Path(__file__).resolve().parents[3] / "app.py")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(folder))
    return folder


def _session(text: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[SELECTION_KEY] = Selection(
        model_source="random:bert:layers=2,width=32,heads=2,seed=11",
        device="cpu",
        corpus_kind="paste",
        corpus_text=text,
    )
    return at


def _counting_extract(monkeypatch, delay_s: float, fail: bool = False) -> list[int]:
    calls: list[int] = []
    real = extraction.extract

    def slow(*args, **kwargs):
        calls.append(1)
        time.sleep(delay_s)  # long enough for the second session to arrive while it runs
        if fail:
            raise InputError("planted failure: the corpus could not be read")
        return real(*args, **kwargs)

    monkeypatch.setattr(extraction, "extract", slow)
    # the Overview's first look on a device with no recorded speed extracts through its own
    # measured path (tests/app/pages/test_overview.py); these tests count the page's extraction
    monkeypatch.setattr("ui.views.overview.first_look_plan", lambda: None)
    return calls


def _run_both(sessions: list[AppTest]) -> None:
    threads = [threading.Thread(target=s.run) for s in sessions]
    for t in threads:
        t.start()
        time.sleep(0.3)
    for t in threads:
        t.join(300)


def test_two_sessions_asking_for_one_key_run_extract_once(cache_dir, monkeypatch):
    calls = _counting_extract(monkeypatch, delay_s=2.0)
    text = "A first sentence for one flight.\nA second one, a little longer.\nThird."
    sessions = [_session(text), _session(text)]
    _run_both(sessions)
    for at in sessions:
        assert not at.exception
        assert at.title and at.title[0].value == "Overview"
    assert len(calls) == 1


def test_a_failure_reaches_both_sessions_and_the_next_request_retries(cache_dir, monkeypatch):
    calls = _counting_extract(monkeypatch, delay_s=2.0, fail=True)
    text = "Only a failing corpus here.\nAnd its second line."
    sessions = [_session(text), _session(text)]
    _run_both(sessions)
    assert len(calls) == 1
    messages = [[e.value for e in at.error] + [e.message for e in at.exception] for at in sessions]
    assert all(any("planted failure" in m for m in found) for found in messages), messages
    sessions[0].run()
    assert len(calls) == 2  # nothing kept from the failure: the next request computes again
