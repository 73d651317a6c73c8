"""Massive activations & sinks: huge activations in the residual stream (Sun et al. 2024), attention
sinks on the first token (Xiao et al. 2023; Gu et al. 2024) and LLM.int8-style outlier features
(Dettmers et al. 2022). Every position is included, the first one too. Image and speech
models get their own view: massive activations by carrier token, high-norm patches or frames
(Darcet et al. 2024), and the patch norms over the image or the frame norms under the waveform.
The sections are in ui/views/massive/text.py and ui/views/massive/media.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import model_and_corpus_or_stop
from isoscope.ui.views.massive import text as view
from isoscope.ui.views.massive.media import media_massive_view

st.title("Massive activations & sinks")
loaded, corpus = model_and_corpus_or_stop()
if loaded.layout.modality != "text":  # vision / speech encoders: carriers, high-norm tokens
    media_massive_view(loaded, corpus)
    st.stop()
view.explain()
n_texts, max_length = view.scan_controls(corpus)
scan = view.scan_or_stop(loaded, corpus, n_texts, max_length)
view.headline(loaded, scan)
view.tabs(corpus, scan, max_length)
