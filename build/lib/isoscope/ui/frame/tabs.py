"""Lazy tabs: a tab's view runs only once the tab has been opened.

``st.tabs(..., on_change="rerun")`` tells the script which tab is open. The open tab's view runs;
a tab opened before during this visit to the page (and for the same model, corpus and settings)
runs too, from the caches, so that going back to it shows its charts at once instead of drawing
them anew, as it would if only the open tab were kept. Arriving on the
page, or another selection, starts again from the open tab only, so arriving does not draw every
tab seen before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from isoscope.ui.frame.selection import get_selection, page_visit
from isoscope.ui.sharing.links import check_tab

SEEN_KEY = "isoscope_tabs_seen"


def lazy_tabs(labels: Sequence[str], views: Sequence[Callable[[], None]], *, key: str) -> None:
    """Tabs ``labels`` whose views run lazily (see the module docstring). ``key``: the tabs'
    widget key, unique on the page."""
    scope = (get_selection(), page_visit())
    seen_by_key: dict = st.session_state.setdefault(SEEN_KEY, {})
    stored_scope, seen = seen_by_key.get(key, (None, set()))
    if stored_scope != scope:
        seen = set()
    check_tab(key, labels)
    tabs = st.tabs(list(labels), key=key, on_change="rerun")
    for label, tab, view in zip(labels, tabs, views, strict=True):
        if tab.open:
            seen.add(label)
        if label in seen:
            with tab:
                view()
    seen_by_key[key] = (scope, seen)
