"""Streamlit glue for sharing: the report's findings and its download (Overview), and the
Embedding Projector / embedding-atlas downloads (Clipping & projections).

The report is :func:`isoscope.share.report.build_report` on the page's own model and extraction, so the
downloaded file is the one ``isoscope report`` writes for the same model, corpus and
settings. The quick sections (outlier dims, anisotropy: no forward pass) open the Overview at once;
the full report (LayerNorm ablation, position probe, massive-activation scan: each runs the model
again) is built only on request (a button at the end of the page, or the download), so the
first page stays fast; it is cached per extraction, and its findings then replace the quick ones.
Once the Quantization page has run on the same model and corpus in this session, its analysis is
added as the report's optional "Quantization readiness" section (never recomputed here).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.lru import LRU
from isoscope.share.report import QUICK_SECTIONS, SECTIONS, Report, build_report
from isoscope.ui.frame.literal import literal
from isoscope.ui.work.cached import cached
from isoscope.ui.work.corpora import media_items
from isoscope.ui.work.extraction import result_key
from isoscope.ui.work.queue import WORK
from isoscope.ui.work.results import criteria_by_state

MAX_REPORTS = 4


@st.cache_resource(max_entries=1, show_spinner=False)
def _full_reports() -> LRU:
    """Full reports by extraction key (process-wide, the last few)."""
    return LRU(MAX_REPORTS)


@cached
def _quick_report(loaded: LoadedModel, result: ExtractionResult) -> Report:
    """The report's quick sections (outlier dims, anisotropy: no forward pass), from the
    criteria the Overview's table and the Outlier page share (computed once)."""
    return build_report(loaded, result, sections=QUICK_SECTIONS, criteria=criteria_by_state(result))


def quick_report(loaded: LoadedModel, result: ExtractionResult) -> Report:
    """:func:`_quick_report` naming what this session opened: a report kept per extraction is
    shared by every path with the same weights (:mod:`isoscope.engine.store.provenance`)."""
    return _quick_report(loaded, result).named(result.model)


def full_report(
    loaded: LoadedModel, result: ExtractionResult, inputs: tuple | None = None, quant=None
) -> Report:
    """The whole report (cached per extraction); the ablation runs on a private model copy.
    ``inputs``: an image / audio analysis's items (:func:`isoscope.ui.work.corpora.media_items`); ``quant``:
    the Quantization page's finished analysis, added as its section."""
    key = _report_key(result, quant)
    store = _full_reports()
    report = store.get(key)
    if report is None:

        def compute(progress) -> Report:
            sections = SECTIONS if quant is None else (*SECTIONS, "quant")
            built = build_report(
                loaded, result, sections=sections, quant=quant, progress=progress, inputs=inputs
            )
            store.put(key, built)
            return built

        # Once for every session (a download button may build it outside the page's run, so no
        # bar here: the Overview shows its own spinner while it waits).
        report = WORK.run("report:" + key, compute, heavy=True, label="Building the report")
    return report.named(result.model)


QUANT_KEY = "quant_last_report"


def remember_quant(loaded: LoadedModel, corpus, report) -> None:
    """Keep the Quantization page's last analysis for this session, so the report download
    (Overview) adds its "Quantization readiness" section without computing it again."""
    st.session_state[QUANT_KEY] = (loaded.fingerprint, corpus.sha, report)


def last_quant(result: ExtractionResult):
    """The session's last quantization analysis of the extraction ``result``'s model and corpus
    (None when the page has not run on them)."""
    entry = st.session_state.get(QUANT_KEY)
    if entry is None or (entry[0], entry[1]) != (result.model_fingerprint, result.corpus_sha):
        return None
    return entry[2]


def quant_key(report) -> str:
    """What identifies one analysis of a model and corpus: texts, max length, K, α and the pairs."""
    scan, sts = report.scan, (report.end or {}).get("sts_pairs") or {}
    return f"{scan.n_texts}:{scan.max_length}:{report.keep}:{report.alpha!r}:{sts.get('sha', '')}"


def _report_key(result: ExtractionResult, quant=None) -> str:
    return result_key(result) + ("" if quant is None else ":quant:" + quant_key(quant))


def _cached_full(result: ExtractionResult, quant=None) -> Report | None:
    report = _full_reports().get(_report_key(result, quant))
    return None if report is None else report.named(result.model)


def report_file_name(result: ExtractionResult) -> str:
    name = str(result.model.get("display_name") or result.model.get("source") or "model")
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.split("/")[-1])
    return f"isoscope_report_{slug}.html"


def _show_findings(report: Report) -> None:
    for section in report.sections:
        if section.skipped is None and section.findings:
            st.markdown(
                f"**{section.title}**\n"
                + "\n".join(f"- {literal(text)}" for text in section.findings)
            )
    for section in report.sections:
        if section.skipped is not None:
            st.caption(f"{section.title}: left out, {literal(section.skipped)}.")


def findings_panel(loaded: LoadedModel, result: ExtractionResult) -> Callable[[], None]:
    """The findings and 'Download report' at the top of the Overview.

    Shows the cached full report's findings, else the quick sections' at once; returns a function
    the page calls at its end, which offers to build the full report (spinner at the bottom, the
    rest of the page already on screen) and then puts its findings in place of the quick ones.
    """
    st.subheader("Findings")
    slot = st.empty()
    inputs = media_items(result)  # here, in the page's run: the download may build it later
    quant = last_quant(result)  # the Quantization page's analysis, when it has run
    report = _cached_full(result, quant)
    with slot.container():
        _show_findings(report or quick_report(loaded, result))
    st.download_button(
        "Download report",
        data=lambda: full_report(loaded, result, inputs, quant).to_html().encode("utf-8"),
        file_name=report_file_name(result),
        mime="text/html",
        key="overview_report",
        icon=":material/description:",
        on_click="ignore",
        help="One self-contained HTML file (opens offline): these findings, the key figure of each "
        "page, the model card, corpus and settings. The same file as `isoscope report`.",
    )

    def finish() -> None:
        if report is not None:
            return
        if not st.button(
            "Compute the remaining findings (LayerNorm ablation, position probe, massive-activation scan)",
            key="overview_full_findings",
            help="About 20 s on the bundled model on 2 CPU cores; cached afterwards.",
        ):
            return
        with st.spinner(
            "Computing the remaining findings (LayerNorm ablation, position probe, massive-activation scan)…"
        ):
            full = full_report(loaded, result, inputs, quant)
        with slot.container():
            _show_findings(full)

    return finish


def export_buttons(
    result: ExtractionResult,
    state: int,
    *,
    points: str,
    clip_dims: list[int],
    rows: np.ndarray,
    coords: np.ndarray,
    method: str,
    pooled: np.ndarray | None = None,
    text_ids: np.ndarray | None = None,
) -> None:
    """Embedding Projector (zip of the three files) and embedding-atlas (Parquet) downloads of the
    points the page projected, raw or with ``clip_dims`` zeroed; atlas x/y = ``coords``."""
    from isoscope.share.export import atlas_bytes, export_points, projector_zip

    def exported():
        return export_points(
            result,
            state,
            points=points,
            clip=clip_dims or "none",
            pooled=pooled,
            text_ids=text_ids,
            rows=rows,
        )

    name = f"isoscope_{result.state_names[state]}_{points}{'_clipped' if clip_dims else ''}"
    c1, c2, c3 = st.columns([1, 1, 2])
    c1.download_button(
        "Embedding Projector",
        data=lambda: projector_zip(exported()),
        file_name=f"{name}_projector.zip",
        mime="application/zip",
        key="proj_export_projector",
        on_click="ignore",
        icon=":material/download:",
        help="tensors.tsv, metadata.tsv and projector_config.json for projector.tensorflow.org "
        "(Load) or TensorBoard's projector.",
    )
    c2.download_button(
        "embedding-atlas",
        data=lambda: atlas_bytes(exported(), method, coords=coords),
        file_name=f"{name}_atlas.parquet",
        mime="application/vnd.apache.parquet",
        key="proj_export_atlas",
        on_click="ignore",
        icon=":material/download:",
        help="Parquet with text, token, x, y (this projection) and the vector: "
        "`embedding-atlas FILE --text text --x x --y y`.",
    )
    c3.caption(
        f"Exports the {len(rows):,} points shown, "
        + (f"with dims {', '.join(map(str, clip_dims))} zeroed" if clip_dims else "raw")
        + " (other post-processings export raw vectors; the CLI's `isoscope export` "
        "exports every point)."
    )
