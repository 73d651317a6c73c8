"""The sidebar's choice as one value: hashable (every cache key holds it), read from the one
session slot, and the page-visit counter that tells a page's arrival from its reruns."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from isoscope.ui.frame.selection import Selection


def test_a_selection_is_hashable_and_equal_by_value():
    a = Selection(model_source="random:bert:layers=2", corpus_kind="paste", corpus_text="x")
    b = Selection(model_source="random:bert:layers=2", corpus_kind="paste", corpus_text="x")
    assert a == b and hash(a) == hash(b)
    assert a != Selection(model_source="random:bert:layers=2", corpus_kind="paste", corpus_text="y")
    assert Selection().model_source == "default" and Selection().corpus_kind == "bundled"


def _visits():
    import streamlit as st

    from isoscope.ui.frame.selection import note_page_visit, page_visit

    path = st.session_state.get("path", "pages/outliers.py")
    st.session_state.setdefault("seen", []).append((note_page_visit(path), page_visit()))


def test_a_visit_counts_arrivals_not_reruns():
    at = AppTest.from_function(_visits, default_timeout=60).run()
    at.run()  # a rerun of the same page: the same visit
    at.session_state["path"] = "pages/anisotropy.py"
    at.run()  # another page: a new visit
    at.run()
    at.session_state["path"] = "pages/outliers.py"
    at.run()  # back to the first page: a visit of its own again
    assert not at.exception, at.exception
    assert at.session_state["seen"] == [(1, 1), (1, 1), (2, 2), (2, 2), (3, 3)]


def _selection():
    import streamlit as st

    from isoscope.ui.frame.selection import (
        Selection,
        get_selection,
        run_whole_corpus,
        whole_corpus_asked,
    )

    sel = get_selection()
    st.session_state["read"] = sel
    st.session_state["asked_before"] = whole_corpus_asked(sel)
    run_whole_corpus()
    st.session_state["asked_after"] = whole_corpus_asked(sel)
    other = Selection(model_source="elsewhere")
    st.session_state["asked_other"] = whole_corpus_asked(other)


def test_the_page_reads_the_one_slot_and_the_whole_corpus_is_asked_per_selection():
    from isoscope.ui.frame.session import SELECTION_KEY

    chosen = Selection(model_source="random:bert:layers=2", corpus_kind="paste", corpus_text="a")
    at = AppTest.from_function(_selection, default_timeout=60)
    at.session_state[SELECTION_KEY] = chosen
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["read"] == chosen
    assert at.session_state["asked_before"] is False and at.session_state["asked_after"] is True
    assert at.session_state["asked_other"] is False  # asked for this selection only
