"""What every page does around its view: an actionable error and a stop (never a traceback) when
the selection cannot be analysed, the result's notices, the explainer every view carries."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _bad_model():
    import streamlit as st

    from isoscope.ui.frame.page import load_or_stop
    from isoscope.ui.frame.selection import Selection
    from isoscope.ui.frame.session import SELECTION_KEY

    st.session_state[SELECTION_KEY] = Selection(
        model_source="/nowhere/no-such-model", device="cpu", corpus_kind="paste", corpus_text="a"
    )
    load_or_stop()
    st.session_state["after"] = True  # never reached: the page stops


def test_an_unloadable_model_stops_the_page_with_an_actionable_message():
    at = AppTest.from_function(_bad_model, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.error and at.error[0].value.startswith("**Cannot analyse this selection.**")
    assert "no-such-model" in at.error[0].value
    assert "Run analysis" in at.info[0].value
    assert "after" not in at.session_state


def _explained():
    from isoscope.ui.frame.page import explainer, show_notices

    class _Result:
        notices = ("only the first 64 tokens of each text were read",)

    show_notices(_Result())
    explainer("What is an outlier dimension?", "Kovaleva et al. (2021).", expanded=True)


def test_notices_and_the_explainer_render():
    at = AppTest.from_function(_explained, default_timeout=60).run()
    assert not at.exception, at.exception
    assert "first 64 tokens" in at.caption[0].value
    assert at.expander[0].label == "ℹ️ What is an outlier dimension?"
    assert "Kovaleva" in at.expander[0].markdown[0].value
