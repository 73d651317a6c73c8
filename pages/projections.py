"""Clipping & projections: post-process a hidden state and compare PCA / UMAP / t-SNE before and
after. The sections are in ui/views/projections.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop, show_notices
from isoscope.ui.server.warmup import start_umap_warmup
from isoscope.ui.views import projections as view
from isoscope.ui.widgets.atlas import every_token_view
from isoscope.ui.widgets.ranges import PROJ_ALL_TOKENS

st.title("Clipping & projections")
warmup = start_umap_warmup()  # once per process, in the background: UMAP's first fit compiles
loaded, result = load_or_stop()
points = view.controls(result)
if points.data_kind == PROJ_ALL_TOKENS:  # every token of the state, drawn by the atlas
    every_token_view(loaded, result, points.state, points.method, points.post, points.seed)
    view.explain()
    st.stop()
view.points_caption(result, points)
show_notices(result)
method = view.shown_method(points.method, warmup)
before, after = view.projections_or_stop(loaded, result, points, method)
view.chart_section(loaded, result, points, method, before, after)
view.exports(loaded, result, points, method, before, after)
view.deltas_section(loaded, result, points)
view.explain()
