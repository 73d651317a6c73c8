"""AppTest set-up shared by every page test."""

from __future__ import annotations

import json

import pytest
import streamlit.testing.v1.app_test as app_test_module
from streamlit.runtime.pages_manager import PagesManager


@pytest.fixture(scope="session", autouse=True)
def _navigation_frame_runs_every_time():
    """AppTest (streamlit 1.67) re-detects the pages/ folder before every run and then runs a page
    file on its own (multipage v1), skipping app.py's sidebar. The real server drops that mode
    once st.navigation is called; do the same here so every rerun runs the frame."""

    class _V2PagesManager(PagesManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            PagesManager.uses_pages_directory = False

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app_test_module, "PagesManager", _V2PagesManager)
        yield


def _refuse_constant(token: str):
    raise ValueError(f"a JSON download holds the bare token {token}, which is not JSON")


def parse_strict(payload: str | bytes):
    """``json.loads`` that refuses NaN, Infinity and -Infinity (Python's default accepts them)."""
    return json.loads(payload, parse_constant=_refuse_constant)


JSON_DOWNLOADS: dict[str, str] = {}  # widget key -> payload of every JSON download rendered


@pytest.fixture(autouse=True)
def _json_downloads_are_strict(monkeypatch):
    """Every JSON download button an app test renders must hold strict JSON: its payload is parsed
    with :func:`parse_strict` as the button is drawn (a bare NaN fails the test that drew it)."""
    from streamlit.delta_generator import DeltaGenerator

    original = DeltaGenerator.download_button

    def checked(self, label, data, *args, **kwargs):
        if kwargs.get("mime") == "application/json":
            payload = data() if callable(data) else data
            parse_strict(payload)
            JSON_DOWNLOADS[str(kwargs.get("key"))] = payload
        return original(self, label, data, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", checked)
    yield


@pytest.fixture(autouse=True)
def _restore_main_module():
    """Streamlit runs a script as ``__main__`` and leaves it there; a later test that spawns a
    process (multiprocessing re-imports ``__main__`` in the child) would then run that script.
    Put pytest's own ``__main__`` back after every app test."""
    import sys

    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


def shown(markdown: str) -> str:
    """What a reader sees of a Markdown string whose visitor text was made literal
    (``isoscope.ui.frame.literal.literal`` backslash-escapes punctuation): the escapes dropped."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown))
