"""Sentence similarity (STS Spearman by hidden state) and word senses (WiC-style), raw vs clipped.
The sections are in ui/views/similarity.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.views import similarity as view
from isoscope.ui.work.media import text_only

st.title("Sentence similarity")
loaded, result = load_or_stop()
text_only(
    result, "Sentence similarity and word senses", "compares sentence pairs and the senses of words"
)
view.intro(loaded, result)
left, right = st.columns(2, gap="large")
with left:
    view.sts_section(loaded, result)
with right:
    view.word_sense_section(loaded, result)
view.explain()
