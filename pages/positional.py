"""Positional information: position embeddings, position probe, TUPE decomposition, variance lab
(NoPE) and queries/keys. Each tab runs only while it is open (lazy tabs); the views are in
ui/positional.py."""

from __future__ import annotations

import streamlit as st

from ui.positional import TAB_VIEWS, TABS
from ui.tabs import lazy_tabs

st.title("Positional information")
st.caption(
    "Where does a Transformer keep token position? In the position table, in outlier neurons, in the "
    "attention logits, or (without position embeddings) in the variance of attention outputs."
)

lazy_tabs(TABS, TAB_VIEWS, key="pos_tab")
