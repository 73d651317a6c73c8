"""What the sidebar chose (:class:`Selection`, cheap and hashable, in every cache key), how a
page reads it, and which visit of a page this run is.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.sharing.saved import saved_selection


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose; cheap and hashable, used in every cache key."""

    model_source: str = "default"
    device: str = "auto"
    dtype: str = "float32"
    allow_pickle: bool = False
    corpus_kind: str = "bundled"
    corpus_text: str = ""
    corpus_file_name: str = ""
    corpus_file_sha: str = ""
    settings: ExtractionSettings = ExtractionSettings()


def get_selection() -> Selection:
    """The selection the pages analyse (an open saved analysis sets its model and settings)."""
    _ensure_navigation_frame()
    return saved_selection(st.session_state.get(SELECTION_KEY, Selection()))


VISIT_KEY = "isoscope_page_visit"  # (page path, visit number) of the page being shown


def note_page_visit(page_path: str) -> int:
    """Count arrivals on pages: the number changes when the app switches to another page and stays
    the same while the page reruns. Called by app.py before the page runs."""
    last_path, visit = st.session_state.get(VISIT_KEY, ("", 0))
    if page_path != last_path:
        visit += 1
        st.session_state[VISIT_KEY] = (page_path, visit)
    return visit


def page_visit() -> int:
    """The number of the current visit to this page (see :func:`note_page_visit`)."""
    return st.session_state.get(VISIT_KEY, ("", 0))[1]


def _ensure_navigation_frame() -> None:
    """Rerun through app.py when Streamlit ran a page file on its own."""
    # No supported mechanism exists (Streamlit 1.67): a ``pages/`` folder beside the entrypoint
    # switches on the old multipage mode (PagesManager.uses_pages_directory, set from the folder
    # at start), which serves a deep link (``/outliers`` right after a server start, every AppTest
    # rerun) by running the page file alone, without the frame, until a session has called
    # ``st.navigation``; there is no config option or API to turn that detection off, and the
    # design card keeps the folder's name. So clear the flag as ``st.navigation`` itself does and
    # rerun, which runs app.py on the same page. The module is private: imported only here.
    from streamlit.runtime.pages_manager import PagesManager

    if getattr(PagesManager, "uses_pages_directory", False):  # absent or False: nothing to do
        PagesManager.uses_pages_directory = False
        st.rerun()


WHOLE_CORPUS_KEY = "isoscope_whole_corpus"  # the selection whose whole corpus was asked for


def whole_corpus_asked(sel: Selection) -> bool:
    """Whether this session asked for the whole corpus of ``sel`` (:func:`run_whole_corpus`)."""
    return st.session_state.get(WHOLE_CORPUS_KEY) == sel


def run_whole_corpus() -> None:
    """The first look's button: the selection's whole corpus from now on (this session)."""
    st.session_state[WHOLE_CORPUS_KEY] = get_selection()
