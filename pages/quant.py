"""Quantization readiness: will this checkpoint survive 8-bit or 4-bit inference, and which layers
will hurt? Activation scales (SmoothQuant's act_scales), kurtosis, simulated W8A8/W4 error per
site and the measured end-to-end loss of each scheme (docs/methods.md section 10). The
sections are in ui/views/quant.py."""

from __future__ import annotations

import streamlit as st

from ui.frame.page import model_and_corpus_or_stop
from ui.views import quant as view

st.title("Quantization readiness")
view.explain()
loaded, corpus = model_and_corpus_or_stop()
n_texts, max_length, keep, alpha = view.controls(corpus)
pairs = view.pairs_or_none(loaded)
report = view.report_or_stop(loaded, corpus, n_texts, max_length, keep, alpha, pairs)
view.summary(loaded, report, pairs)
view.recipe_section(loaded, corpus, report, n_texts, max_length)
view.tabs(loaded, corpus, report, n_texts, max_length)
