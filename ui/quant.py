"""Cached quantization analyses for the "Quantization readiness" page: one pass per (model,
corpus, texts, max length), re-evaluated for each K and α; the per-block sensitivity once per pass."""

from __future__ import annotations

import streamlit as st

from backend.analysis.geometry.similarity import SentencePairs, read_pairs_csv, sts_sample
from backend.analysis.quant.readiness import (
    MagnitudeTiles,
    QuantReport,
    QuantScan,
    evaluate,
    scan_sites,
    site_magnitudes,
)
from backend.engine.models import private_copy
from ui.common import get_corpus, get_extraction, get_model, memo_heavy
from ui.ranges import QUANT_PAIRS


def _key(n_texts: int, max_length: int) -> tuple:
    loaded, corpus = get_model(), get_corpus()
    return (loaded.fingerprint, corpus.sha, n_texts, max_length)


def scan_key(n_texts: int, max_length: int) -> tuple:
    """What identifies one pass (the page runs it only after a button press)."""
    return _key(n_texts, max_length)


def get_scan(n_texts: int, max_length: int) -> QuantScan:
    loaded, corpus = get_model(), get_corpus()

    def compute(progress) -> QuantScan:
        return scan_sites(loaded, corpus.texts[:n_texts], max_length=max_length, progress=progress)

    label = f"Recording the projection inputs of {loaded.info.display_name}:"
    return memo_heavy("quant.scan", _key(n_texts, max_length), label, compute, "batches")


def get_report(
    n_texts: int, max_length: int, keep: int, alpha: float, pairs: SentencePairs | None = None
) -> QuantReport:
    """Errors and end metric for K and α (with ``pairs``, an encoder's STS change per scheme),
    with the sensitivity of the pass. Fake quantization swaps weights, so it runs on a private
    copy: sessions using the cached model never see them."""
    loaded = get_model()
    scan = get_scan(n_texts, max_length)

    def sensitivity(progress):
        copy = private_copy(loaded)
        return evaluate(
            copy, scan, schemes=("per_token",), end=False, progress=progress
        ).sensitivity

    sens = memo_heavy(
        "quant.sensitivity",
        _key(n_texts, max_length),
        "Quantizing one block at a time:",
        sensitivity,
        "steps",
    )

    def compute(progress) -> QuantReport:
        copy = private_copy(loaded)
        ev = evaluate(
            copy,
            scan,
            keep=keep,
            alpha=alpha,
            sensitivity=False,
            pairs=pairs,
            progress=progress,
        )
        return QuantReport(scan, ev.errors, ev.end, sens, int(keep), float(alpha))

    key = (*_key(n_texts, max_length), int(keep), float(alpha), pairs and pairs.sha)
    return memo_heavy("quant.report", key, "Simulating every scheme:", compute, "schemes")


def choose_pairs() -> SentencePairs | None:
    """The encoder's STS pairs for the quant page: none, the bundled CC0 sample (as on the
    Similarity page when nothing is uploaded) or an uploaded CSV read by the one pairs reader.
    Raises :class:`~backend.engine.errors.InputError` for an unreadable upload."""
    choice = st.selectbox(
        "STS pairs (encoders: the Spearman change per scheme)",
        list(QUANT_PAIRS.options),
        QUANT_PAIRS.index,
        key="quant_pairs",
        help="Sentence pairs with gold scores (sentence1,sentence2,score): each scheme's STS "
        "Spearman × 100 of the mean-pooled final state, against full precision.",
    )
    if choice == QUANT_PAIRS.options[1]:
        return sts_sample()
    if choice == QUANT_PAIRS.options[2]:
        upload = st.file_uploader(
            "Pairs CSV: sentence1,sentence2,score",
            type=["csv", "tsv", "txt"],
            key="quant_pairs_csv",
        )
        return read_pairs_csv(upload.getvalue(), upload.name) if upload is not None else None
    return None


def with_outlier_dims(report: QuantReport) -> QuantReport:
    """The report with the hidden-state outlier dims of the sidebar's extraction."""
    _, result = get_extraction()
    return report.with_outlier_dims(result)


def get_tiles(n_texts: int, max_length: int, site_index: int) -> MagnitudeTiles:
    loaded, corpus = get_model(), get_corpus()
    scan = get_scan(n_texts, max_length)
    site = scan.sites[site_index].site

    def compute(progress) -> MagnitudeTiles:
        return site_magnitudes(
            loaded, corpus.texts[:n_texts], site, max_length=max_length, progress=progress
        )

    key = (*_key(n_texts, max_length), site.name)
    return memo_heavy("quant.tiles", key, f"Reading {site.name}:", compute, "batches")


LAST_KEY = "quant_last_report"


def remember(report: QuantReport) -> None:
    """Keep the page's last analysis for this session, so the report download (Overview) adds its
    "Quantization readiness" section without computing it again."""
    loaded, corpus = get_model(), get_corpus()
    st.session_state[LAST_KEY] = (loaded.fingerprint, corpus.sha, report)


def last_report(result) -> QuantReport | None:
    """The session's last quantization analysis of the extraction ``result``'s model and corpus
    (None when the page has not run on them)."""
    entry = st.session_state.get(LAST_KEY)
    if entry is None or (entry[0], entry[1]) != (result.model_fingerprint, result.corpus_sha):
        return None
    return entry[2]


def quant_key(report: QuantReport) -> str:
    """What identifies one analysis of a model and corpus: texts, max length, K, α and the pairs."""
    scan, sts = report.scan, (report.end or {}).get("sts_pairs") or {}
    return f"{scan.n_texts}:{scan.max_length}:{report.keep}:{report.alpha!r}:{sts.get('sha', '')}"
