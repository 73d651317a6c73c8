"""The "Before / after" tab: every site's input and weight error before and after SmoothQuant or
the rotation, and one site's channels before and after."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.before_after import ChannelProfile, before_after, channel_profile
from isoscope.analysis.quant.readiness import QuantReport, QuantScan
from isoscope.analysis.quant.schemes import SCHEME_LABELS
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.plots.quant import before_after_frame, channel_figure, moved_figure
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.quant.shared import site_name
from isoscope.ui.work.cached import cached, heavy


@heavy("Smoothing and rotating every site:", "sites")
def site_transforms(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, alpha: float,
    _scan: QuantScan, *, progress,
) -> list:  # fmt: skip
    """Every site before and after SmoothQuant (α) and the rotation, on the scan's sample."""
    return before_after(loaded, _scan, alpha=alpha)


@cached
def site_channels(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, index: int,
    transform: str, alpha: float, _scan: QuantScan,
) -> ChannelProfile:  # fmt: skip
    """One site's per-channel activation max and weight range, before and after ``transform``
    (weights read, never swapped: the shared model is fine)."""
    return channel_profile(loaded, _scan, index, transform, alpha=alpha)


def before_after_tab(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    st.subheader("Before / after")
    transform = st.radio(
        "Transform",
        ["smoothquant", "rotation"],
        format_func=lambda k: (
            SCHEME_LABELS[k] + (f" (α = {report.alpha:g})" if k == "smoothquant" else "")
        ),
        horizontal=True,
        key="quant_transform",
    )
    stats = site_transforms(loaded, corpus, n_texts, max_length, report.alpha, report.scan)
    fig = moved_figure(report, stats, transform)
    st.plotly_chart(fig, width="stretch", key="quant_moved_chart")
    frame = before_after_frame(report, stats)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons("quant_before_after", fig=fig, frame=frame, name="quant_before_after")
    channels_view(loaded, corpus, report, n_texts, max_length, transform)
    explainer(
        "How to read it",
        """
Each site's per-token int8 error of the **input** (blue) and per-channel int8 error of the **weight**
(red), before (dotted) and after the transform (solid), on the scan's token sample, in full precision
otherwise. SmoothQuant divides input channel j by s_j = max|X_j|^α / max|W_j|^(1-α) and multiplies the
weight's column j by it (Xiao et al. 2023, arXiv 2211.10438): the activation's outliers move into the
weight. Where the red line ends above the blue one, the weight side is now the hard one (lower α). The
rotation (QuaRot, Ashkboos et al. 2024, arXiv 2404.00456) spreads outliers over all channels of both.
The table adds max / median |x|, kurtosis, the share of |x| >= 6 and the weight's column max / median.
""",
    )


def channels_view(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int,
    transform: str,
) -> None:  # fmt: skip
    """Per channel of one site: the activation max |x| and the weight range, before and after."""
    scan = report.scan
    names = [site_name(s) for s in scan.sites]
    worst = max(range(len(scan.sites)), key=lambda i: scan.sites[i].max_over_median)
    index = int(
        st.selectbox(
            "Site, per channel",
            range(len(names)),
            index=worst,
            format_func=lambda i: names[i],
            key="quant_channel_site",
        )
    )
    profile = site_channels(
        loaded, corpus, n_texts, max_length, index, transform, report.alpha, scan
    )
    fig = channel_figure(profile)
    st.plotly_chart(fig, width="stretch", key="quant_channel_chart")
    download_buttons("quant_channels", fig=fig, name="quant_channels")
    explainer(
        "How to read it (per channel)",
        """
One dot per input channel of the chosen site (the most spiky one by default): top, the largest |x| of
that channel over the scan's token sample; bottom, the weight's range in that input column (max |W| over
every projection the site feeds). Grey is before, colour after. SmoothQuant divides channel j's
activations by s_j and multiplies the weight's column j by it, so the outlier channels drop on top and the
same columns rise below (Xiao et al. 2023, arXiv 2211.10438, fig. 4). The Hadamard rotation mixes
channels: both panels flatten (Ashkboos et al. 2024, arXiv 2404.00456; Tseng et al. 2024, QuIP#, arXiv
2402.04396).
""",
    )
