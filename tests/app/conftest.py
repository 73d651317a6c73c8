"""AppTest set-up shared by every page test."""

from __future__ import annotations

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
