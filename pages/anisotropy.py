"""Anisotropy: random-pair cosine histograms, isotropy metrics by layer (raw vs post-processed vs
random init), the dimensions that carry the cosine, and the mean-cosine vs IsoScore contrast. The
sections are in ui/views/anisotropy.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop, show_notices
from isoscope.ui.views import anisotropy as view

st.title("Anisotropy")
loaded, result = load_or_stop()
view.explain()
show_notices(result)
choice, compare_random = view.controls(result)
series = view.series_or_stop(result, choice)
random_series = view.random_init_series(result, compare_random)
view.histogram_section(result, series | random_series)
view.metrics_section(series, random_series)
view.contribution_section(series)
view.contrast_section(result, series["raw"])
