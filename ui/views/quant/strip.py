"""The "Layers × role" tab: one quantity per site as a heat strip of block by role."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.readiness import QuantReport
from isoscope.plots.quant import STRIP_QUANTITIES, heat_strip_figure
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons


def strip_tab(report: QuantReport) -> None:
    st.subheader("Layers × role")
    quantity = st.selectbox(
        "Quantity",
        list(STRIP_QUANTITIES),
        format_func=lambda k: STRIP_QUANTITIES[k][0],
        key="quant_strip",
    )
    fig = heat_strip_figure(report, quantity)
    st.plotly_chart(fig, width="stretch", key="quant_strip_chart")
    download_buttons("quant_strip", fig=fig, name=f"quant_{quantity.replace(':', '_')}")
    explainer(
        "How to read it",
        """
One cell per site: block (x) and role (y): the input of the attention projections (q/k/v), of the
attention output projection, of the MLP's input projections (gate/up or fc1) and of its output projection
(down/fc2). Roles come from the order in which the block runs its projections and from which of them read a
norm's output. **max/median** finds activation spikes (Yang et al. 2024: often the first and last blocks'
down-projections); **kurtosis** (Bondarenko et al. 2023) grows with outlier channels; the error rows are the
simulated relative output error of each scheme at that site.
""",
    )
