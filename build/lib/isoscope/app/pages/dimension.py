"""What is this dimension? The card of one dimension or direction at one hidden state: where it
shows, what writes it, what reads it, what it does. The sections are in ui/views/dimension.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.views import dimension as view

st.title("What is this dimension?")
loaded, result = load_or_stop()
if loaded.layout.modality != "text":
    st.info("The dimension card reads text models; pick one in the sidebar.")
    st.stop()
view.explain()
card = view.card_or_stop(loaded, result, view.controls(result))
view.headline(card)
view.where_it_shows(card)
view.what_writes_it(card)
view.what_reads_it(card)
view.what_it_does(card)
view.geometry(card)
