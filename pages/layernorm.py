"""LayerNorm: outlier gamma/beta dims (BERT Busters), their overlap with hidden-state outliers,
the ablation lab against random controls, the one-dimension-at-a-time sweep, trained vs random.
The sections are in ui/views/layernorm.py."""

from __future__ import annotations

import streamlit as st

from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.views import layernorm as view

st.title("LayerNorm outlier parameters and ablation")
st.caption(
    "A few LayerNorm scaling factors (γ) and biases (β) at the same dimension across layers can carry "
    "huge magnitudes; zeroing them can wreck a model while random dimensions do nothing (BERT Busters)."
)
loaded, result = load_or_stop()
weights, k, share = view.choose_weights()
model, sites = view.model_or_stop(loaded, weights)
found, all_params, all_found = view.detection(model, sites, k, share)
view.heatmap_section(model, result, k, share, all_params, all_found, found)
view.criterion_explainer(k, share)
view.ablation_lab(model, result, sites, found)
view.sweep_section(model, result, found)
view.debate()
