"""SAE features: a released sparse autoencoder against the geometry (Bricken et al. 2023; Gao et
al. 2024; Rajamanoharan et al. 2024; Lieberum et al. 2024): fidelity by token kind, the features
of the outlier and massive dimensions, dense and dead features, a feature's card. The sections
are in ui/views/sae.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import model_and_corpus_or_stop
from isoscope.ui.views import sae as view

st.title("SAE features")
loaded, corpus = model_and_corpus_or_stop()
if loaded.layout.modality != "text":
    st.info("The SAE page reads text models; pick one in the sidebar.")
    st.stop()
view.explain()
chosen = view.controls(loaded, corpus)
if chosen is None:
    st.stop()
source, n_texts, settings = chosen
reading, sae = view.reading_or_stop(loaded, corpus, source, n_texts, settings)
view.headline(reading)
view.tabs(loaded, corpus, n_texts, reading, sae, settings)
