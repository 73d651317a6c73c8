"""The "Schemes" tab: the end metric and the mean per-site error of every simulated scheme."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.readiness import QuantReport
from isoscope.plots.quant import scheme_figure, scheme_frame
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons


def schemes_tab(report: QuantReport) -> None:
    scan, keep, alpha = report.scan, report.keep, report.alpha
    st.subheader("Schemes")
    fig = scheme_figure(report)
    st.plotly_chart(fig, width="stretch", key="quant_schemes_chart")
    frame = scheme_frame(report)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons("quant_schemes", fig=fig, frame=frame, name="quant_schemes")
    explainer(
        "How to read it",
        f"""
Left: what the model loses with **every** site fake-quantized, measured end to end on the first
{scan.end_ids.shape[0]} texts (decoders: mean next-token KL against the full-precision model; encoders:
1 − cosine of the mean-pooled final state). Right: the simulated per-site error, averaged over sites.
Static per-tensor scales break first (one spike sets the scale of every token); per-token scales, keeping
{keep} channels, SmoothQuant (α = {alpha:g}) and the rotation each attack outliers differently.
""",
    )
