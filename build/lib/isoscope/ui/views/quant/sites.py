"""The "Sites" tab: every site's table, optionally with the overlap of the hidden-state outlier and
massive-activation dims, and its downloads."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.readiness import QuantReport
from isoscope.analysis.quant.schemes import SCHEME_LABELS
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import massive_rule
from isoscope.plots.quant import sites_frame
from isoscope.ui.frame.literal import message
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.links import dimension_links
from isoscope.ui.work.extraction import get_extraction


def with_outlier_dims(report: QuantReport) -> QuantReport:
    """The report with the hidden-state outlier dims of the sidebar's extraction."""
    _, result = get_extraction()
    return report.with_outlier_dims(result)


def sites_tab(loaded: LoadedModel, corpus: Corpus, report: QuantReport) -> None:
    scan = report.scan
    st.subheader("Every site")
    shown = report
    if st.toggle(
        "Overlap with the hidden-state outlier dims (runs the sidebar's extraction)",
        key="quant_outliers",
    ):
        try:
            shown = with_outlier_dims(report)
        except IsoscopeError as exc:
            st.error(message(exc))
    frame = sites_frame(shown)
    rows = shown.site_rows()
    frame["outlier overlap"] = [
        "" if r["outlier_overlap"] is None else ", ".join(map(str, r["outlier_overlap"]))
        for r in rows
    ]
    frame["massive overlap"] = [
        "" if r["massive_overlap"] is None else ", ".join(map(str, r["massive_overlap"]))
        for r in rows
    ]
    st.dataframe(frame, hide_index=True, width="stretch")
    st.caption(
        f"Massive-activation dims of the residual stream ({massive_rule()}): "
        + (", ".join(map(str, scan.massive_dims)) or "none")
        + f". Scheme columns: {', '.join(SCHEME_LABELS.values())}."
    )
    st.markdown(dimension_links(loaded.info.num_layers // 2, scan.massive_dims))
    payload = shown.to_dict(
        model=loaded.info.to_dict(), corpus={"name": corpus.name, "sha": corpus.sha}
    )
    download_buttons("quant_sites", frame=frame, json_data=payload, name="quant")
