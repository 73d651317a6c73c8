"""The Quantization readiness page's summary: the scan's notes, the verdict (linked to the decision
and its recipe), the end metric of each scheme with its interval, and what the pass ran on."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.readiness import QuantReport
from isoscope.analysis.quant.readiness.report import MIN_BOOTSTRAP_TEXTS
from isoscope.analysis.quant.schemes import SCHEME_LABELS
from isoscope.engine.inputs.pairs import SentencePairs
from isoscope.engine.load.models import LoadedModel
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.views.quant.shared import RECIPE_ANCHOR


def summary(loaded: LoadedModel, report: QuantReport, pairs: SentencePairs | None) -> None:
    """The scan's notes, the verdict, the end metric of each scheme and what it ran on."""
    keep = report.keep
    scan = report.scan
    for note in scan.notes:
        st.caption(f"ℹ️ {message(note)}")

    recipe_link = f" [The decision and its recipe ↓](#{RECIPE_ANCHOR})" if report.end else ""
    st.markdown(f"**Verdict.** {report.verdict()}{recipe_link}")
    if report.end is not None:
        m = st.columns(4)
        fmt = (lambda v: f"{v:.3g}") if report.metric == "kl" else (lambda v: f"{v:.5f}")
        label = "KL" if report.metric == "kl" else "cosine"
        m[0].metric(f"{label}, W8A8 per token", fmt(report.end["per_token"]))
        m[1].metric(f"{label}, keep {keep}", fmt(report.end["keep_k"]))
        m[2].metric(f"{label}, SmoothQuant", fmt(report.end["smoothquant"]))
        m[3].metric(f"{label}, rotation", fmt(report.end["rotation"]))
        if report.interval:
            shown = ("per_token", "keep_k", "smoothquant", "rotation")
            st.caption(
                "95% intervals (bootstrap over the end texts): "
                + "; ".join(
                    f"{SCHEME_LABELS[k]} {fmt(report.interval[k][0])} – {fmt(report.interval[k][1])}"
                    for k in shown
                )
                + "."
            )
            close = [(a, b) for a, b in report.overlapping() if a in shown and b in shown]
            if scan.end_ids.shape[0] < MIN_BOOTSTRAP_TEXTS:
                st.caption(
                    f"⚠️ Only {scan.end_ids.shape[0]} end text(s): too few for these intervals to "
                    "mean much; a corpus of more, shorter texts (or more end tokens) helps."
                )
            elif close:
                st.caption(
                    "⚠️ Overlapping intervals, so these orders are not settled on these texts: "
                    + "; ".join(f"{SCHEME_LABELS[a]} vs {SCHEME_LABELS[b]}" for a, b in close)
                    + ". More end texts (a longer corpus) narrow them."
                )
        sts = report.end.get("sts_spearman")
        if sts:
            change = report.end["sts_spearman_change"]
            cols = st.columns(4)
            cols[0].metric("STS Spearman × 100, full precision", f"{sts['full_precision']:.1f}")
            for col, k in zip(cols[1:], ("per_token", "keep_k", "rotation"), strict=True):
                col.metric(f"STS, {SCHEME_LABELS[k]}", f"{sts[k]:.1f}", f"{change[k]:+.1f}")
            st.caption(f"STS on {len(pairs):,} pairs from {literal(pairs.name)}.")
    st.caption(
        f"{literal(loaded.info.display_name)} · {scan.n_texts:,} texts · {scan.n_tokens:,} tokens · "
        f"{len(scan.sites)} sites · site errors and medians on a seeded sample of {scan.error_tokens:,} "
        f"tokens · end metric on the first {scan.end_ids.shape[0]} texts ({scan.end_tokens:,} tokens) · "
        f"pass {scan.seconds:.1f} s"
    )
