"""Identical work runs once on a shared server: two sessions (AppTests in two threads) opening the
same selection at the same time run one extraction and get the same result object; a failure
reaches both as the same message, and the next request retries."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import isoscope.engine.extraction as extraction
from isoscope.engine.errors import InputError
from isoscope.ui.frame.selection import Selection
from isoscope.ui.frame.session import SELECTION_KEY

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
    monkeypatch.setattr("isoscope.ui.views.overview.first_look_plan", lambda: None)
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


TWO_TEXTS = "The bank raised its rates.\nWe sat on the river bank."


def _recorded(monkeypatch) -> tuple[list[str], list[tuple]]:
    """``(events, estimates)``: every spinner text and ``"weights read"`` (the checkpoint's load
    begins) in order, and every first-page estimate computed."""
    import streamlit

    from isoscope.engine.budget import time_estimate
    from isoscope.engine.load import models

    events: list[str] = []
    estimates: list[tuple] = []
    spinner, read_folder, estimate = (
        streamlit.spinner,
        models.read_folder,
        time_estimate.estimate_first_page,
    )

    def recording_spinner(text, *args, **kwargs):
        events.append(text)
        return spinner(text, *args, **kwargs)

    def recording_read(*args, **kwargs):
        events.append("weights read")
        return read_folder(*args, **kwargs)

    def counting_estimate(*args):
        estimates.append(args)
        return estimate(*args)

    monkeypatch.setattr(streamlit, "spinner", recording_spinner)
    monkeypatch.setattr(models, "read_folder", recording_read)
    monkeypatch.setattr(time_estimate, "estimate_first_page", counting_estimate)
    return events, estimates


def test_a_local_folders_spinner_says_the_first_pages_time_before_the_load(
    cache_dir, tiny_bert_dir, tmp_path, monkeypatch
):
    """With a speed recorded on this device the loading spinner reads "Loading <folder> · first
    page: about N s on cpu (...)" before the weights are read; a cache hit (a rerun, a second
    session) computes no estimate again and shows no loading spinner."""
    import shutil

    from transformers import AutoTokenizer

    from isoscope.engine.budget import throughput
    from isoscope.engine.budget.batching import Batching, padded_tokens
    from isoscope.engine.budget.estimates import describe_seconds
    from isoscope.engine.load import preflight

    folder = tmp_path / "tiny-bert"  # a path of its own: no earlier test has it cached
    shutil.copytree(tiny_bert_dir, folder)
    parameters = sum(preflight.folder_census(folder).values())
    throughput.record(cache_dir, "cpu", parameters, 10, 10.0)  # 1 s per token: a slow device
    counts = throughput.token_counts(
        AutoTokenizer.from_pretrained(folder),
        TWO_TEXTS.splitlines(),
        Selection().settings.max_length,
    )
    tokens = sum(counts)
    padded = padded_tokens(counts, Batching.of(Selection().settings))
    events, estimates = _recorded(monkeypatch)

    def session() -> AppTest:
        at = AppTest.from_file(APP, default_timeout=180)
        at.session_state[SELECTION_KEY] = Selection(
            model_source=str(folder), device="cpu", corpus_kind="paste", corpus_text=TWO_TEXTS
        )
        return at

    at = session()
    at.run()
    assert not at.exception and at.title[0].value == "Overview"
    extraction_s = throughput.extraction_seconds(1 / parameters, parameters, padded)
    extraction = (
        f"extraction {describe_seconds(extraction_s)} ({parameters / 1e6:,.1f} M "
        f"parameters x {tokens:,} tokens; extraction speed measured at this size"
    )
    (said,) = [e for e in events if e.startswith(f"Loading {folder} · first page: ")]
    assert extraction in said and ": load about " in said  # the load's phase, named
    assert events.index(said) < events.index("weights read")
    assert len(estimates) == 1
    loading = [e for e in events if e.startswith("Loading")]
    at.run()
    second = session()
    second.run()
    assert not second.exception and second.title[0].value == "Overview"
    assert len(estimates) == 1  # neither the rerun nor the new session computed it again
    assert [e for e in events if e.startswith("Loading")] == loading
