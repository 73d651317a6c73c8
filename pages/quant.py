"""Quantization readiness: will this checkpoint survive 8-bit or 4-bit inference, and which layers
will hurt? Activation scales (SmoothQuant's act_scales), kurtosis, simulated W8A8/W4 error per
site and the measured end-to-end loss of each scheme (docs/methods.md section 10). The
sections are in ui/views/quant/, the tabs one module each."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import model_and_corpus_or_stop
from isoscope.ui.views.quant import tabs
from isoscope.ui.views.quant.decision import recipe_section
from isoscope.ui.views.quant.run import controls, explain, pairs_or_none, report_or_stop
from isoscope.ui.views.quant.summary import summary

st.title("Quantization readiness")
explain()
loaded, corpus = model_and_corpus_or_stop()
n_texts, max_length, keep, alpha = controls(corpus)
pairs = pairs_or_none(loaded)
report = report_or_stop(loaded, corpus, n_texts, max_length, keep, alpha, pairs)
summary(loaded, report, pairs)
recipe_section(loaded, corpus, report, n_texts, max_length)
tabs(loaded, corpus, report, n_texts, max_length)
