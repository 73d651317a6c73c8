"""Compare: model A vs model B on one corpus, or one model on corpus A vs corpus B (linear CKA,
anisotropy and IsoScore, outlier dims gained and lost, |mean| differences, the cosine share of
the top dims, STS by state, LayerNorm deltas), and a checkpoint trajectory. The sections are in
ui/views/compare.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop, show_notices
from isoscope.ui.views import compare as view

st.title("Compare")
view.explain()
loaded_a, result_a = load_or_stop()
show_notices(result_a)
tab_pair, tab_trajectory = st.tabs(["A vs B", "Checkpoint trajectory"])
with tab_pair:
    view.pair_tab(loaded_a, result_a)
with tab_trajectory:
    view.trajectory_tab()
