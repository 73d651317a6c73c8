"""Positional information: position embeddings, position probe, TUPE decomposition, variance lab
(NoPE) and queries/keys; for image models the patch grid of the position table and a row / column
probe. Each tab runs only while it is open (lazy tabs); its view is one module of
ui/views/positional/."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.views.positional import TAB_VIEWS, TABS

st.title("Positional information")
st.caption(
    "Where does a Transformer keep token position? In the position table, in outlier neurons, in the "
    "attention logits, or (without position embeddings) in the variance of attention outputs."
)

load_or_stop()  # an actionable error before the tabs; image and audio analyses get their own views
lazy_tabs(TABS, TAB_VIEWS, key="pos_tab")
