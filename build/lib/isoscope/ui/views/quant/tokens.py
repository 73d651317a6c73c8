"""The "Token × channel" tab: |x| of every token and channel of one site, max over tiles."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.readiness import MagnitudeTiles, QuantReport, site_magnitudes
from isoscope.analysis.quant.sites import Site
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.plots.quant import magnitude_figure
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.quant.shared import site_name
from isoscope.ui.work.cached import heavy


@heavy(lambda loaded, corpus, n_texts, max_length, site: f"Reading {site.name}:", "batches")
def site_tiles(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, site: Site, *, progress
) -> MagnitudeTiles:
    """|x| of every token and channel of one site, max over tiles."""
    return site_magnitudes(
        loaded, corpus.texts[:n_texts], site, max_length=max_length, progress=progress
    )


def tokens_tab(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    scan = report.scan
    st.subheader("Token × channel magnitudes")
    names = [site_name(s) for s in scan.sites]
    worst = max(range(len(scan.sites)), key=lambda i: scan.sites[i].max_over_median)
    index = st.selectbox(
        "Site", range(len(names)), index=worst, format_func=lambda i: names[i], key="quant_site"
    )
    try:
        tiles = site_tiles(loaded, corpus, n_texts, max_length, scan.sites[int(index)].site)
    except IsoscopeError as exc:
        st.error(message(exc))
        return
    fig = magnitude_figure(tiles)
    st.plotly_chart(fig, width="stretch", key="quant_tiles_chart")
    site = scan.sites[int(index)]
    st.markdown(
        "Top channels by max |x|: "
        + ", ".join(f"**{t['channel']}** ({t['max_abs']:.3g})" for t in site.top(6))
    )
    download_buttons("quant_tiles", fig=fig, name="quant_token_channel")
    explainer(
        "How to read it",
        """
The figure SmoothQuant's users ask for: |x| of every token (rows, in corpus order) and input channel
(columns) of one site. Thousands of tokens would not fit a plot, so each cell is the **max** over a tile of
consecutive tokens and channels: a spike stays visible however small it is. Outlier channels show as
bright columns (what per-channel smoothing, keep-K and rotations address); a bright row is a token with
huge values (the first token, a delimiter), which is what per-token scales address.
""",
    )
