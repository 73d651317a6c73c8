"""Overview (for a slow model, a first look at a prefix of the corpus): model card, corpus
summary, outlier dims per layer, anisotropy by layer, the first position. The sections are in
ui/views/overview.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.sharing.exports import findings_panel
from isoscope.ui.views import overview as view

st.title("Overview")
plan = view.first_look_plan()  # a slow model's first look at a prefix of the corpus, else None
loaded, result = load_or_stop(corpus=plan.corpus if plan else None)
statistics_done = view.statistics_clock(result)  # what the next first look budgets
view.first_look_note(plan)
finish_findings = findings_panel(loaded, result)
view.cards(result)
view.outliers_and_anisotropy(result)
view.first_position_section(result, plan)
statistics_done()
finish_findings()  # the remaining findings, with the rest of the page already shown
