"""What every page does around its view: the model and extraction or an actionable error that
stops the page, the result's notices, and the 'what is this' expander each view carries.
"""

from __future__ import annotations

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.ui.frame.literal import message
from isoscope.ui.work.corpora import get_corpus
from isoscope.ui.work.extraction import get_extraction
from isoscope.ui.work.models import get_model


def load_or_stop(
    source: str | None = None, corpus: Corpus | None = None
) -> tuple[LoadedModel, ExtractionResult]:
    """Model + extraction for the page (of ``corpus`` instead of the selected one when given), or
    an actionable error and ``st.stop()``."""
    try:
        return get_extraction(source=source, corpus=corpus)
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this selection.** {message(exc)}")
        st.info("Change the model or corpus in the sidebar and press **Run analysis**.")
        st.stop()
        raise  # st.stop() raises; keeps type checkers happy


def model_and_corpus_or_stop() -> tuple[LoadedModel, Corpus]:
    """The selected model and corpus (for pages that run their own pass over the corpus instead
    of the extraction), or an actionable error and ``st.stop()``."""
    try:
        return get_model(), get_corpus()
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this selection.** {message(exc)}")
        st.info("Change the model or corpus in the sidebar and press **Run analysis**.")
        st.stop()
        raise  # st.stop() raises; keeps type checkers happy


def show_notices(result: ExtractionResult) -> None:
    for notice in result.notices:
        st.caption(f"ℹ️ {message(notice)}")


def explainer(title: str, body_md: str, expanded: bool = False) -> None:
    """'What is this / reference' expander every view carries (docs/methods.md: cite the source)."""
    with st.expander(f"ℹ️ {title}", expanded=expanded):
        st.markdown(body_md)
