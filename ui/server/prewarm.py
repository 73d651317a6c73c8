"""Warm the server before the class arrives: compute, in the server process, what the Overview
shows for each prewarmed model on the bundled corpus with the sidebar's defaults.

``isoscope serve --prewarm MODEL[,MODEL]`` (on by default, the default model) starts
:func:`start` in a low-priority background thread as the server starts, so the first visitor finds
the model loaded, the extraction in memory (and on disk) and the Overview's analyses memoised,
and nobody's first page waits for the warm-up: a visitor who arrives while it runs joins the same
work (:mod:`isoscope.engine.serve.flights`). No Streamlit session is needed: everything goes through the
process-wide caches the pages use.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.load.models import source_is_causal


def default_selection(source: str):
    """The selection the sidebar makes when a visitor picks ``source`` and changes nothing else
    (the first position left out on causal models)."""
    from isoscope.ui.frame.selection import Selection

    return Selection(
        model_source=source, settings=ExtractionSettings(exclude_first=source_is_causal(source))
    )


def prewarm_overview(source: str, full_report: bool = True) -> float:
    """What the Overview computes for ``source``; seconds taken."""
    from isoscope.ui.sharing.exports import full_report as build_full_report
    from isoscope.ui.sharing.exports import quick_report
    from isoscope.ui.work.extraction import get_extraction
    from isoscope.ui.work.results import anisotropy, outlier_dims_by_state

    started = time.perf_counter()
    loaded, result = get_extraction(default_selection(source))
    anisotropy(result)
    outlier_dims_by_state(result)
    quick_report(loaded, result)
    if full_report:  # the Overview's "remaining findings" button, ready when pressed
        build_full_report(loaded, result)
    return time.perf_counter() - started


def _run(models: list[str]) -> None:
    # Streamlit warns once per cached call made outside a session ("missing ScriptRunContext");
    # this thread has none by design, and sessions' own threads always have one.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(
        logging.ERROR
    )
    if hasattr(os, "nice"):  # this thread only (Linux: nice applies to the calling thread)
        try:
            os.nice(10)
        except OSError:
            pass
    for source in models:
        try:
            seconds = prewarm_overview(source)
            sys.stderr.write(f"isoscope: prewarmed {source} ({seconds:.1f} s)\n")
        except Exception as exc:  # a prewarm that fails must not take the server down
            sys.stderr.write(f"isoscope: prewarm of {source} failed: {exc}\n")


def start(models: list[str]) -> threading.Thread:
    thread = threading.Thread(target=_run, args=(models,), daemon=True, name="isoscope-prewarm")
    thread.start()
    return thread
