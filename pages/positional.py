"""Positional information: position embeddings, position probe, TUPE decomposition, variance lab
(NoPE) and queries/keys. Each tab runs only while it is open (lazy tabs); the views are in
ui/positional.py."""

from __future__ import annotations

import streamlit as st

from ui.common import load_or_stop
from ui.inputs import text_only
from ui.positional import TAB_VIEWS, TABS
from ui.tabs import lazy_tabs

st.title("Positional information")
st.caption(
    "Where does a Transformer keep token position? In the position table, in outlier neurons, in the "
    "attention logits, or (without position embeddings) in the variance of attention outputs."
)

text_only(
    load_or_stop()[1],
    "The positional views (position probe, TUPE's token terms, variance lab)",
    "runs texts token by token (a 2-D patch grid and a row/column probe are not built yet)",
)
lazy_tabs(TABS, TAB_VIEWS, key="pos_tab")
