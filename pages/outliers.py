"""Outlier dimensions: layers x dims heatmap, the four criteria, a per-text view, token-type split.
The sections are in ui/views/outliers.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop, show_notices
from isoscope.ui.views import outliers as view
from isoscope.ui.work.results import criteria_by_state

st.title("Outlier dimensions")
loaded, result = load_or_stop()
view.explain()
show_notices(result)
thresholds = view.criteria_controls()
by_state = criteria_by_state(result, thresholds)
view.headline(result, by_state)
view.heatmap_section(result, thresholds)
view.state_section(loaded, result, by_state, thresholds)
