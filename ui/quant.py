"""Cached quantization analyses for the "Quantization readiness" page: one pass per (model,
corpus, texts, max length), re-evaluated for each K and α; the per-block sensitivity once per pass."""

from __future__ import annotations

from dataclasses import replace

from backend.analysis.quant.readiness import (
    MagnitudeTiles,
    QuantReport,
    QuantScan,
    evaluate,
    outlier_dims_by_state,
    scan_sites,
    site_magnitudes,
)
from ui.common import get_corpus, get_extraction, get_model, memo
from ui.progress import progress_bar

QUANT_MAX_LENGTHS = (16, 32, 64, 128, 256)


def _key(n_texts: int, max_length: int) -> tuple:
    loaded, corpus = get_model(), get_corpus()
    return (loaded.fingerprint, corpus.sha, n_texts, max_length)


def scan_key(n_texts: int, max_length: int) -> tuple:
    """What identifies one pass (the page runs it only after a button press)."""
    return _key(n_texts, max_length)


def get_scan(n_texts: int, max_length: int) -> QuantScan:
    loaded, corpus = get_model(), get_corpus()

    def compute() -> QuantScan:
        with progress_bar(
            f"Recording the projection inputs of {loaded.info.display_name}:", "batches"
        ) as progress:
            return scan_sites(
                loaded, corpus.texts[:n_texts], max_length=max_length, progress=progress
            )

    return memo("quant.scan", _key(n_texts, max_length), compute)


def get_report(n_texts: int, max_length: int, keep: int, alpha: float) -> QuantReport:
    """Errors and end metric for K and α, with the sensitivity of the pass."""
    loaded = get_model()
    scan = get_scan(n_texts, max_length)

    def sensitivity():
        with progress_bar("Quantizing one block at a time:", "steps") as progress:
            ev = evaluate(loaded, scan, schemes=("per_token",), end=False, progress=progress)
        return ev.sensitivity

    def compute() -> QuantReport:
        with progress_bar("Simulating every scheme:", "schemes") as progress:
            ev = evaluate(
                loaded, scan, keep=keep, alpha=alpha, sensitivity=False, progress=progress
            )
        sens = memo("quant.sensitivity", _key(n_texts, max_length), sensitivity)
        return QuantReport(scan, ev.errors, ev.end, sens, int(keep), float(alpha))

    return memo("quant.report", (*_key(n_texts, max_length), int(keep), float(alpha)), compute)


def with_outlier_dims(report: QuantReport) -> QuantReport:
    """The report with the hidden-state outlier dims of the sidebar's extraction."""
    _, result = get_extraction()
    return replace(report, outlier_dims=outlier_dims_by_state(result))


def get_tiles(n_texts: int, max_length: int, site_index: int) -> MagnitudeTiles:
    loaded, corpus = get_model(), get_corpus()
    scan = get_scan(n_texts, max_length)
    site = scan.sites[site_index].site

    def compute() -> MagnitudeTiles:
        with progress_bar(f"Reading {site.name}:", "batches") as progress:
            return site_magnitudes(
                loaded, corpus.texts[:n_texts], site, max_length=max_length, progress=progress
            )

    return memo("quant.tiles", (*_key(n_texts, max_length), site.name), compute)
