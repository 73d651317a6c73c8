"""Guided tour: the five papers' central claims in order, each checked live on the loaded model.

A lecture without typing: Previous / Next (or the step buttons) walk through the claims; every step
is computed once per model and corpus and then cached. The sections are in ui/views/tour.py.
"""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.views import tour as view

st.title("Guided tour")
view.intro()
loaded, result = load_or_stop()
number = view.choose_step()
step = view.measure(loaded, result, number)
view.show(step)
view.navigation(number)
view.explain()
