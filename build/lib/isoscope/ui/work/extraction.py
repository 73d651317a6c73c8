"""Extraction results for the pages: this process's memory (the last results, bounded in bytes),
else the disk cache, else a run, once for every session that asks at the same time; and the
process-wide memo of derived analyses, light and heavy, under the same rule.

Caching: models in ``st.cache_resource`` keyed by cheap values (:mod:`isoscope.ui.work.models`);
extraction results in a process-wide LRU keyed by (model fingerprint, corpus hash, settings)
and on disk (:mod:`isoscope.engine.store.cache`), so a restart is instant.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from isoscope.engine.budget.estimates import describe_seconds
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.lru import LRU
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.engine.store.entries import cache_key
from isoscope.engine.store.provenance import attribute
from isoscope.ui.frame.literal import literal
from isoscope.ui.frame.selection import Selection, get_selection
from isoscope.ui.sharing.saved import open_saved, saved_corpus, saved_model
from isoscope.ui.work.corpora import get_corpus, media_corpus_for
from isoscope.ui.work.models import get_model
from isoscope.ui.work.queue import shared_run

T = TypeVar("T")

RESULTS_IN_MEMORY_BYTES = 2 << 30  # token samples held in memory across the last results


def _result_bytes(result: ExtractionResult) -> int:
    return int(result.sample_vectors.nbytes)


@st.cache_resource(max_entries=1, show_spinner=False)
def _extraction_store() -> LRU:
    """One per process (shared by every session): the last 4 results, at most 2 GiB of samples."""
    return LRU(4, max_bytes=RESULTS_IN_MEMORY_BYTES, weigh=_result_bytes)


@st.cache_resource(max_entries=1, show_spinner=False)
def _memo_store() -> LRU:
    return LRU(256)


def extraction_key(loaded: LoadedModel, corpus: Corpus, settings: ExtractionSettings) -> str:
    return cache_key(loaded.fingerprint, corpus.sha, settings)


EXTRACTION_LOG = "isoscope: extraction started"  # one line per extraction the server runs


def log_extraction(loaded: LoadedModel, corpus: Corpus, settings: ExtractionSettings) -> None:
    """The server log's line for an extraction about to run (what benchmarks/classroom.py counts):
    the page's own, or the first look's on a device with no recorded speed."""
    key = extraction_key(loaded, corpus, settings)
    sys.stderr.write(f"{EXTRACTION_LOG}: {loaded.info.display_name} ({key[:12]})\n")


def get_extraction(
    selection: Selection | None = None, source: str | None = None, corpus: Corpus | None = None
) -> tuple[LoadedModel, ExtractionResult]:
    """Model + extraction for the selection (or for ``corpus``, e.g. a first look's prefix of the
    selected corpus): this process's memory, else
    :func:`isoscope.engine.store.cached_extract.cached_extract` (disk cache, else a run), once for every session
    that asks at the same time (:func:`shared_run`; a disk read does not queue behind runs)."""
    sel = selection or get_selection()
    saved = open_saved() if selection is None else None  # a saved analysis replaces the run
    if saved is not None and source in (None, saved.model.get("source")):
        return saved_model(saved, lambda source: get_model(source=source)), saved
    loaded = get_model(sel, source=source)
    if corpus is None:
        corpus = _saved_inputs(saved) if saved is not None else get_corpus(sel)
    key = extraction_key(loaded, corpus, sel.settings)
    store = _extraction_store()
    result = store.get(key)
    if result is None:
        disk = ResultCache()
        on_disk = disk.path(key).exists()

        def compute(progress) -> ExtractionResult:
            if not on_disk:
                log_extraction(loaded, corpus, sel.settings)
            # a result that nothing could keep carries one notice saying so
            done = cached_extract(
                loaded, corpus, sel.settings, None if on_disk else progress, cache=disk
            )
            store.put(key, done)  # here, so it is kept even if every waiter has left
            return done

        estimate, shares = (None, ()) if on_disk else _estimate(loaded, corpus, sel)
        about = (
            "" if estimate is None else f" ({describe_seconds(estimate)} estimated on this device)"
        )
        label = f"Extracting hidden states of {literal(loaded.info.display_name)}{about}:"
        result = shared_run(
            "extract:" + key,
            label,
            compute,
            heavy=not on_disk,
            unit="texts",
            estimate_s=estimate,
            shares=shares,
        )
    # the arrays are shared by every path with these weights; the card names what this session opened
    return loaded, attribute(result, loaded.info.to_dict())


def _estimate(
    loaded: LoadedModel, corpus: Corpus, sel: Selection
) -> tuple[float | None, tuple[float, ...]]:
    """The extraction's estimated seconds before the first batch, from the parameter count and
    this device's measured speed (:mod:`isoscope.engine.budget.throughput`; the calibration of
    the model's shape the load's estimate ran, where the records do not give the growth): the
    bar's ETA until the first batch, which then refines it; and the share of the work done
    after each count of texts, which the bar reads its first batches with. (None, ()) without
    a measurement, and for images and audio."""
    from isoscope.engine.budget import throughput
    from isoscope.engine.budget.batching import Batching, padded_tokens, work_shares

    if getattr(corpus, "kind", "text") != "text":
        return None, ()
    counts = throughput.token_counts(loaded.tokenizer, corpus.texts, sel.settings.max_length)
    batching = Batching.of(sel.settings)
    seconds = throughput.estimate_seconds(
        ResultCache().root,
        throughput.device_key(loaded.device),
        throughput.parameter_count(loaded.model),
        padded_tokens(counts, batching),
        throughput.model_shape(loaded.model),
    )
    return seconds, tuple(work_shares(counts, batching)) if seconds is not None else ()


def is_computed(loaded: LoadedModel, corpus: Corpus, settings: ExtractionSettings) -> bool:
    """Whether this extraction is at hand (this process's memory or the disk cache)."""
    key = extraction_key(loaded, corpus, settings)
    return _extraction_store().get(key) is not None or ResultCache().path(key).exists()


def _saved_inputs(saved: ExtractionResult):
    """What another model runs on beside a saved analysis: its texts, or (images / audio, which
    a saved analysis names by path only) the sidebar's folder when it holds the same items."""

    if saved.input_kind == "text":
        return saved_corpus(saved)
    return media_corpus_for(saved, "run another model on them")


def memo(name: str, key_parts: tuple, compute: Callable[[], Any]) -> Any:
    """Process-wide memo for derived analyses: ``key_parts`` must identify the inputs fully
    (use :func:`extraction_key` of the result plus the parameters). Computed once for all the
    sessions that ask at the same time, in the first one's thread (cheap work: never queued)."""
    key = hashlib.sha256(repr((name, key_parts)).encode()).hexdigest()
    store = _memo_store()
    value = store.get(key)
    if value is None:

        def run(_progress) -> Any:
            computed = compute()
            store.put(key, computed)
            return computed

        value = shared_run("memo:" + key, name, run, heavy=False)
    return value


def memo_heavy(
    name: str,
    key_parts: tuple,
    label: str,
    compute: Callable[[Callable[[int, int], bool]], T],
    unit: str = "",
) -> T:
    """:func:`memo` for heavy work (comparisons, reports, ablations, probes, scans, sweeps): it
    waits in the server's fair queue and runs on a worker thread, so ``compute(progress)`` must
    not call Streamlit. A computation told to stop because nobody waits any more (its progress
    answered False) is not kept."""
    key = hashlib.sha256(repr((name, key_parts)).encode()).hexdigest()
    store = _memo_store()
    value = store.get(key)
    if value is None:

        def run(progress) -> T:
            stopped = False

            def tracked(done: int, total: int) -> bool:
                nonlocal stopped
                keep_going = progress(done, total)
                stopped = stopped or keep_going is False
                return keep_going

            computed = compute(tracked)
            if not stopped:
                store.put(key, computed)
            return computed

        value = shared_run("memo:" + key, label, run, heavy=True, unit=unit)
    return value


def result_key(result: ExtractionResult) -> str:
    return cache_key(result.model_fingerprint, result.corpus_sha, result.settings)
