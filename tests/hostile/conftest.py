"""The hostile-visitor tier: a shared server (``ISOSCOPE_SHARED=1``) tried the way a student who
wants to misuse it would, through the same doors a browser has (links, inputs, uploads, tabs).

AppTest runs the frame (app.py) as the server does; the set-up of tests/app is reused here."""

from __future__ import annotations

from pathlib import Path

import pytest

from isoscope.ui.server import access
from tests.app.conftest import (  # noqa: F401  (fixtures: registered by being imported here)
    _navigation_frame_runs_every_time,
    _restore_main_module,
)

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TINY = "random:bert:layers=2,width=32,heads=2,seed=5"


@pytest.fixture
def shared_env(monkeypatch, tmp_path):
    """A shared server's environment, with its own cache and no passphrase; the access rules are
    read afresh, and Streamlit's error-details option is put back afterwards (it is global)."""
    import streamlit as st

    details = st.get_option("client.showErrorDetails")
    monkeypatch.setenv("ISOSCOPE_SHARED", "1")
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("ISOSCOPE_PASSPHRASE", "ISOSCOPE_TRUST_PROXY", "ISOSCOPE_RUNS_PER_MINUTE"):
        monkeypatch.delenv(name, raising=False)
    access.reset_policy()
    yield monkeypatch
    access.reset_policy()
    st.set_option("client.showErrorDetails", details)


def shared_app(model: str = TINY, **selection):
    """An AppTest of the frame whose session starts on ``model`` (on the CPU)."""
    from streamlit.testing.v1 import AppTest

    from isoscope.ui.frame.selection import Selection
    from isoscope.ui.frame.session import SELECTION_KEY

    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state[SELECTION_KEY] = Selection(model_source=model, device="cpu", **selection)
    return at
