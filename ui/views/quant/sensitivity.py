"""The "Sensitivity" tab: the end metric with one block quantized at a time, and the layer-wise
curve with blocks 1..k quantized."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.readiness import QuantReport, QuantScan, prefix_curve
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel, private_copy
from isoscope.plots.quant import prefix_figure, sensitivity_figure
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.work.cached import heavy


@heavy("Quantizing blocks 1..k:", "blocks")
def layer_curve(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, _scan: QuantScan, *,
    progress,
) -> list:  # fmt: skip
    """The end metric with only blocks 1..k quantized per token, for every k, on a private copy."""
    return prefix_curve(private_copy(loaded), _scan, progress=progress)


def sensitivity_tab(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    st.subheader("Layer sensitivity")
    if not report.sensitivity:
        st.info("No sensitivity for this model.")
        return
    fig = sensitivity_figure(report)
    st.plotly_chart(fig, width="stretch", key="quant_sensitivity_chart")
    download_buttons(
        "quant_sensitivity",
        fig=fig,
        json_data=report.sensitivity,
        name="quant_sensitivity",
    )
    if report.end is not None and st.toggle(
        "Layer-wise curve: only blocks 1..k quantized (one pass of the end texts per block)",
        key="quant_prefix",
    ):
        curve = layer_curve(loaded, corpus, n_texts, max_length, report.scan)
        curve_fig = prefix_figure(report, curve)
        st.plotly_chart(curve_fig, width="stretch", key="quant_prefix_chart")
        download_buttons("quant_prefix", fig=curve_fig, json_data=curve, name="quant_layerwise")
    explainer(
        "How to read it",
        """
Bars: the end metric with **only that block** quantized (W8A8 per token), every other block in full
precision. Line: the block's mean simulated per-site error. The Spearman correlation in the title says
whether the cheap per-site proxy ranks the blocks as the measurement does; where it is low, trust the bars.
""",
    )
