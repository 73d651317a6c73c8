"""Lazy tabs in a small AppTest: only the open tab's view runs on arrival."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _script():
    import streamlit as st

    from isoscope.ui.frame.tabs import lazy_tabs

    def view(name):
        def run():
            st.session_state.setdefault("ran", []).append(name)
            st.write(f"view {name}")

        return run

    lazy_tabs(["One", "Two", "Three"], [view("one"), view("two"), view("three")], key="planted")


def test_only_the_open_tab_runs_on_arrival():
    at = AppTest.from_function(_script, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.session_state["ran"] == ["one"]
    from isoscope.ui.frame.tabs import SEEN_KEY

    seen = at.session_state[SEEN_KEY]["planted"][1]
    assert seen == {"One"}
