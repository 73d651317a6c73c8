"""Shared Streamlit glue: the selection, cached model/extraction loaders, downloads, errors.

The sidebar that sets the selection is ui/sidebar.py; the cache idiom is ui/cached.py, the typed
cached analyses that several pages share are ui/results.py; each page's body is in ui/views/.

Caching: models in ``st.cache_resource`` keyed by cheap values (source, device, dtype, pickle
opt-in, head) with a small ``max_entries``; extraction results in a process-wide LRU keyed by
(model fingerprint, corpus hash, settings) and on disk (backend.engine.store.cache), so a restart is instant.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from backend.engine.budget.progress import eta_text
from backend.engine.budget.throughput import TimeEstimate, describe_seconds, first_look_budget
from backend.engine.environment import quiet_libraries, use_runtime_environment
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import ExtractionResult, ExtractionSettings
from backend.engine.inputs.corpus import Corpus, bundled_corpus, corpus_from_bytes, corpus_from_text
from backend.engine.jsonio import strict_json
from backend.engine.load.models import LoadedModel, load_model
from backend.engine.load.source import source_label
from backend.engine.lru import LRU
from backend.engine.serve.flights import WaitState, WorkQueue
from backend.engine.store.cache import ResultCache, cache_key, cached_extract
from backend.engine.store.provenance import attribute
from ui import access
from ui.saved import open_saved, saved_corpus, saved_model, saved_selection
from ui.session import SELECTION_KEY

use_runtime_environment()


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose; cheap and hashable, used in every cache key."""

    model_source: str = "default"
    device: str = "auto"
    dtype: str = "float32"
    allow_pickle: bool = False
    corpus_kind: str = "bundled"
    corpus_text: str = ""
    corpus_file_name: str = ""
    corpus_file_sha: str = ""
    settings: ExtractionSettings = ExtractionSettings()


# ----------------------------------------------------------------------------- models


def _quiet() -> None:
    quiet_libraries()


@st.cache_resource(max_entries=3, show_spinner=False)
def _load_model_cached(
    source: str,
    device: str,
    dtype: str,
    allow_pickle: bool,
    head: str,
    quota: int | None,
    _first_page: Callable[[Callable[[str], None]], Any] | None = None,
) -> LoadedModel:
    """The load under a spinner. ``_first_page(say)`` (left out of the key, like every argument
    named with a leading underscore) builds the load's ``on_preflight``, which says the first
    page's estimate through the spinner before the weights are read: only a load that runs calls
    it, so a cache hit reads no headers and no tokenizer."""
    _quiet()
    name = source_label(source)
    with _changing_spinner(f"Loading {name}…") as say:
        return load_model(
            source,
            device=device,
            dtype=dtype,
            allow_pickle=allow_pickle,
            head=head,
            quota_bytes=quota,
            on_preflight=None if _first_page is None else _first_page(say),
        )


@contextlib.contextmanager
def _changing_spinner(text: str) -> Iterator[Callable[[str], None]]:
    """``with _changing_spinner(text) as say:`` a spinner whose text ``say(new)`` replaces.
    Streamlit's spinner keeps the text it opened with, so a new text closes it and opens another.
    A spinner is a transient element, which a cached function's replay does not record; a
    placeholder made outside the cached function and written inside it would be recorded and
    then fail the replay of every cache hit (CacheReplayClosureError)."""
    with contextlib.ExitStack() as stack:

        def say(new: str) -> None:
            stack.close()
            stack.enter_context(st.spinner(new))

        say(text)
        yield say


def _download_first(
    source: str, allow_pickle: bool, quota: int | None, sel: Selection
) -> TimeEstimate | None:
    """A Hub id (or a ``random-like:`` copy of one) not in the cache yet: download it here, with
    a bar in bytes and an ETA, before the cached load; once the small files are in and before
    the weights come, the bar also says how long the first page will take
    (:func:`backend.engine.budget.throughput.time_preflight`; returned, for the load's spinner).
    Streamlit's stop ends the script in the bar's update, which cancels the download (complete
    files stay; nothing half-written)."""
    from backend.engine.budget import throughput
    from backend.engine.load import hub
    from backend.engine.load.preflight import once

    parsed = hub.to_download(source)
    if parsed is None:
        return None
    meter = hub.DownloadMeter()
    bar = st.progress(0.0, text=f"Downloading {parsed.text} from the Hugging Face Hub…")
    first_page: list[TimeEstimate] = []
    fetched = [0]

    def progress(done: int, total: int) -> None:
        fetched[0] = done
        text = f"Downloading {parsed.text}: {meter.describe(done, total)}"
        text += "".join(f" · {e.describe(first_look_budget())}" for e in first_page)
        bar.progress(min(done / max(total, 1), 1.0), text=text)

    on_preflight = _time_preflight(sel, first_page.append)
    try:
        hub.fetch(
            parsed,
            allow_pickle=allow_pickle,
            progress=progress,
            quota_bytes=quota,
            before_weights=None if on_preflight is None else once(on_preflight),
        )
        throughput.record_download(ResultCache().root, fetched[0], meter.clock() - meter.started)
    finally:
        bar.empty()
    return first_page[0] if first_page else None


def _time_preflight(sel: Selection, show: Callable[[TimeEstimate], None]):
    """The ``on_preflight(parameters, folder)`` that passes the first page's
    :class:`backend.engine.budget.throughput.TimeEstimate` on the selected corpus to ``show`` (None
    when the corpus is bad: the extraction says why)."""
    from backend.engine.budget import throughput

    try:
        corpus = get_corpus(sel)
    except IsoscopeError:
        return None
    root = ResultCache().root
    batching = throughput.Batching.of(sel.settings)
    return throughput.time_preflight(
        root, sel.device, corpus, sel.settings.max_length, show, batching
    )


def get_model(
    selection: Selection | None = None, head: str = "base", source: str | None = None
) -> LoadedModel:
    """The selected model (or ``source``), cached per (source, device, dtype, pickle, head).

    Every model the UI loads comes through here, so a shared server's rules apply to all of them
    (sidebar, links, Compare's model B): a source outside them is refused with one text, and
    pickle weights are never allowed (:mod:`ui.access`). While a load runs, its spinner says how
    long the first page will take (a download's estimate is reused, not computed again)."""
    sel = selection or get_selection()
    rules = access.policy()
    chosen = rules.check_model_source(source or sel.model_source)
    allow_pickle = sel.allow_pickle and rules.allow_pickle
    downloaded = _download_first(chosen, allow_pickle, rules.quota_bytes, sel)

    def first_page(say: Callable[[str], None]):
        def show(estimate: TimeEstimate) -> None:
            say(f"Loading {source_label(chosen)} · {estimate.describe(first_look_budget())}")

        if downloaded is not None:
            return lambda parameters, folder: show(downloaded)
        return _time_preflight(sel, show)

    return _load_model_cached(
        chosen, sel.device, sel.dtype, allow_pickle, head, rules.quota_bytes, first_page
    )


# ----------------------------------------------------------------------------- corpus


@st.cache_resource(max_entries=1, show_spinner=False)
def _uploaded_store() -> LRU:
    """Uploaded corpus files (name, bytes) by hash, one store per process: the last 8, <= 200 MiB."""
    return LRU(8, max_bytes=200 << 20, weigh=lambda item: len(item[1]))


def remember_upload(sha: str, name: str, raw: bytes) -> None:
    """Keep an uploaded corpus file in memory under its hash (the selection holds only the hash)."""
    _uploaded_store().put(sha, (name, raw))


def get_corpus(selection: Selection | None = None) -> Corpus:
    """The selected corpus (images and audio: :func:`ui.inputs.media_corpus`); on a shared server
    within the per-visitor text limit."""
    from ui.inputs import MEDIA_KINDS, media_corpus

    sel = selection or get_selection()
    if sel.corpus_kind == "paste":
        corpus = corpus_from_text(sel.corpus_text)
    elif sel.corpus_kind == "upload":
        stored = _uploaded_store().get(sel.corpus_file_sha)
        if stored is None:
            raise IsoscopeError("the uploaded file is no longer in memory; upload it again")
        corpus = corpus_from_bytes(stored[1], stored[0])
    elif sel.corpus_kind in MEDIA_KINDS:
        return media_corpus(sel.corpus_kind, sel.corpus_text)
    else:
        return bundled_corpus()
    if access.shared():
        access.policy().limits.check_texts(len(corpus))
    return corpus


def media_corpus_of(result: ExtractionResult):
    """The sidebar's image / audio corpus when ``result`` read it (a result names its items by
    path only, so views that rerun the model take them from here); None for text, and for a saved
    analysis whose items are not the sidebar's."""

    if result.input_kind == "text":
        return None
    corpus = get_corpus()
    return corpus if corpus.sha == result.corpus_sha else None


def media_corpus_for(result: ExtractionResult, purpose: str):
    """:func:`media_corpus_of`, or one message when the items are not at hand (a result names
    them by path only): ``purpose`` says what choosing their folder would allow."""
    from backend.engine.inputs.media import KIND_NOUNS

    corpus = media_corpus_of(result)
    if corpus is None:
        raise IsoscopeError(
            f"this analysis keeps only the names of its {KIND_NOUNS[result.input_kind]}; choose "
            f"their folder in the sidebar and run the analysis to {purpose}"
        )
    return corpus


def media_items(result: ExtractionResult) -> tuple | None:
    """The items of :func:`media_corpus_of` (None for text or when they are not at hand)."""
    corpus = media_corpus_of(result)
    return None if corpus is None else corpus.items


# ----------------------------------------------------------------------------- extraction


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


# ----------------------------------------------------------------------------- shared work

T = TypeVar("T")
EXTRACTION_LOG = "isoscope: extraction started"  # one line per extraction the server runs


def log_extraction(loaded: LoadedModel, corpus: Corpus, settings: ExtractionSettings) -> None:
    """The server log's line for an extraction about to run (what benchmarks/classroom.py counts):
    the page's own, or the first look's on a device with no recorded speed."""
    key = extraction_key(loaded, corpus, settings)
    sys.stderr.write(f"{EXTRACTION_LOG}: {loaded.info.display_name} ({key[:12]})\n")


def _workers() -> int:
    raw = os.environ.get("ISOSCOPE_WORKERS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else (os.cpu_count() or 1)


# One per server process (a module is imported once, whatever the number of sessions): identical
# work runs once, heavy work waits in a fair queue of at most ISOSCOPE_WORKERS runs at a time.
WORK = WorkQueue(workers=_workers())


def _session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def _wait_text(
    state: WaitState,
    label: str,
    unit: str,
    running_s: float = 0.0,
    estimate_s: float | None = None,
) -> str:
    if not state.running:
        ahead = state.ahead + state.busy
        noun = "analysis" if ahead == 1 else "analyses"
        return f"Waiting: {ahead} {noun} ahead of you · {label}"
    if state.total:
        suffix = f" {unit}" if unit else ""
        eta = eta_text(state.done, state.total, running_s, estimate_s)  # measured throughput
        return f"{label} {state.done:,} / {state.total:,}{suffix}{eta}"
    return f"{label} …"


def shared_run(
    key: str,
    label: str,
    compute: Callable[[Callable[[int, int], bool]], T],
    *,
    heavy: bool = True,
    unit: str = "",
    estimate_s: float | None = None,
) -> T:
    """``compute(progress)`` once per ``key`` across every session of this server (see
    :mod:`backend.engine.serve.flights`): a heavy one in the fair queue's worker threads (it must not
    call Streamlit), a light one in the first caller's thread. A session that waits sees a bar
    with its place in the queue, then the shared progress; closing the tab or changing a control
    leaves the queue without cancelling what others wait for."""
    bar = None
    shown: tuple[float, str] | None = None
    running_since: float | None = None

    def on_wait(state: WaitState) -> None:
        nonlocal bar, shown, running_since
        if state.running and running_since is None:
            running_since = time.monotonic()
        running_s = time.monotonic() - running_since if running_since is not None else 0.0
        text = _wait_text(state, label, unit, running_s, estimate_s)
        fraction = min(state.done / state.total, 1.0) if state.running and state.total else 0.0
        if (fraction, text) == shown:  # 30 waiters re-sending an unchanged bar cost the server
            return
        shown = (fraction, text)
        if bar is None:
            bar = st.progress(fraction, text=text)
        else:
            bar.progress(fraction, text=text)

    owner = _session_id()
    if heavy and not WORK.in_flight(key):
        access.check_run_allowed(owner)  # a shared server's runs-per-minute limit (joining is free)
    try:
        return WORK.run(key, compute, owner=owner, heavy=heavy, label=label, on_wait=on_wait)
    finally:
        if bar is not None:
            bar.empty()


def get_extraction(
    selection: Selection | None = None, source: str | None = None, corpus: Corpus | None = None
) -> tuple[LoadedModel, ExtractionResult]:
    """Model + extraction for the selection (or for ``corpus``, e.g. a first look's prefix of the
    selected corpus): this process's memory, else
    :func:`backend.engine.store.cache.cached_extract` (disk cache, else a run), once for every session
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

        estimate = None if on_disk else _estimate(loaded, corpus, sel)
        about = (
            "" if estimate is None else f" ({describe_seconds(estimate)} estimated on this device)"
        )
        label = f"Extracting hidden states of {loaded.info.display_name}{about}:"
        result = shared_run(
            "extract:" + key, label, compute, heavy=not on_disk, unit="texts", estimate_s=estimate
        )
    # the arrays are shared by every path with these weights; the card names what this session opened
    return loaded, attribute(result, loaded.info.to_dict())


def _estimate(loaded: LoadedModel, corpus: Corpus, sel: Selection) -> float | None:
    """The extraction's estimated seconds before the first batch, from the parameter count and
    this device's last measured speed (:mod:`backend.engine.budget.throughput`): the bar's ETA until
    the first batch, which then refines it. None without a measurement, and for images and audio."""
    from backend.engine.budget import throughput

    if getattr(corpus, "kind", "text") != "text":
        return None
    counts = throughput.token_counts(loaded.tokenizer, corpus.texts, sel.settings.max_length)
    return throughput.estimate_seconds(
        ResultCache().root,
        throughput.device_key(loaded.device),
        throughput.parameter_count(loaded.model),
        throughput.padded_tokens(counts, throughput.Batching.of(sel.settings)),
    )


WHOLE_CORPUS_KEY = "isoscope_whole_corpus"  # the selection whose whole corpus was asked for


def is_computed(loaded: LoadedModel, corpus: Corpus, settings: ExtractionSettings) -> bool:
    """Whether this extraction is at hand (this process's memory or the disk cache)."""
    key = extraction_key(loaded, corpus, settings)
    return _extraction_store().get(key) is not None or ResultCache().path(key).exists()


def whole_corpus_asked(sel: Selection) -> bool:
    """Whether this session asked for the whole corpus of ``sel`` (:func:`run_whole_corpus`)."""
    return st.session_state.get(WHOLE_CORPUS_KEY) == sel


def run_whole_corpus() -> None:
    """The first look's button: the selection's whole corpus from now on (this session)."""
    st.session_state[WHOLE_CORPUS_KEY] = get_selection()


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


# ----------------------------------------------------------------------------- sidebar


def get_selection() -> Selection:
    """The selection the pages analyse (an open saved analysis sets its model and settings)."""
    _ensure_navigation_frame()
    return saved_selection(st.session_state.get(SELECTION_KEY, Selection()))


VISIT_KEY = "isoscope_page_visit"  # (page path, visit number) of the page being shown


def note_page_visit(page_path: str) -> int:
    """Count arrivals on pages: the number changes when the app switches to another page and stays
    the same while the page reruns. Called by app.py before the page runs."""
    last_path, visit = st.session_state.get(VISIT_KEY, ("", 0))
    if page_path != last_path:
        visit += 1
        st.session_state[VISIT_KEY] = (page_path, visit)
    return visit


def page_visit() -> int:
    """The number of the current visit to this page (see :func:`note_page_visit`)."""
    return st.session_state.get(VISIT_KEY, ("", 0))[1]


def _ensure_navigation_frame() -> None:
    """Rerun through app.py when Streamlit ran a page file on its own."""
    # No supported mechanism exists (Streamlit 1.67): a ``pages/`` folder beside the entrypoint
    # switches on the old multipage mode (PagesManager.uses_pages_directory, set from the folder
    # at start), which serves a deep link (``/outliers`` right after a server start, every AppTest
    # rerun) by running the page file alone, without the frame, until a session has called
    # ``st.navigation``; there is no config option or API to turn that detection off, and the
    # design card keeps the folder's name. So clear the flag as ``st.navigation`` itself does and
    # rerun, which runs app.py on the same page. The module is private: imported only here.
    from streamlit.runtime.pages_manager import PagesManager

    if getattr(PagesManager, "uses_pages_directory", False):  # absent or False: nothing to do
        PagesManager.uses_pages_directory = False
        st.rerun()


# ----------------------------------------------------------------------------- page helpers


def load_or_stop(
    source: str | None = None, corpus: Corpus | None = None
) -> tuple[LoadedModel, ExtractionResult]:
    """Model + extraction for the page (of ``corpus`` instead of the selected one when given), or
    an actionable error and ``st.stop()``."""
    try:
        return get_extraction(source=source, corpus=corpus)
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this selection.** {exc}")
        st.info("Change the model or corpus in the sidebar and press **Run analysis**.")
        st.stop()
        raise  # st.stop() raises; keeps type checkers happy


def model_and_corpus_or_stop() -> tuple[LoadedModel, Corpus]:
    """The selected model and corpus (for pages that run their own pass over the corpus instead
    of the extraction), or an actionable error and ``st.stop()``."""
    try:
        return get_model(), get_corpus()
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this selection.** {exc}")
        st.info("Change the model or corpus in the sidebar and press **Run analysis**.")
        st.stop()
        raise  # st.stop() raises; keeps type checkers happy


def show_notices(result: ExtractionResult) -> None:
    for notice in result.notices:
        st.caption(f"ℹ️ {notice}")


def explainer(title: str, body_md: str, expanded: bool = False) -> None:
    """'What is this / reference' expander every view carries (docs/methods.md: cite the source)."""
    with st.expander(f"ℹ️ {title}", expanded=expanded):
        st.markdown(body_md)


def json_payload(value: Any) -> str:
    """The text of every JSON download: :func:`backend.engine.jsonio.strict_json` (numpy to Python,
    NaN / inf to null), the same as the CLI's JSON files."""
    return strict_json(value, indent=1)


def download_buttons(
    key: str,
    *,
    fig: go.Figure | None = None,
    frame: pd.DataFrame | None = None,
    json_data: Any = None,
    name: str = "isoscope",
) -> None:
    """PNG of a Plotly figure (rendered by kaleido only when clicked), CSV of a DataFrame, and
    ``json_data`` as strict JSON (:func:`json_payload`: NaN and inf written as null, as the CLI does)."""
    cols = st.columns(3)
    if fig is not None:
        cols[0].download_button(
            "PNG",
            data=lambda: fig.to_image(format="png", scale=2),
            file_name=f"{name}.png",
            mime="image/png",
            key=f"dl_png_{key}",
            on_click="ignore",
            icon=":material/image:",
        )
    if frame is not None:
        cols[1].download_button(
            "CSV",
            data=lambda: frame.to_csv(index=False),
            file_name=f"{name}.csv",
            mime="text/csv",
            key=f"dl_csv_{key}",
            on_click="ignore",
            icon=":material/table:",
        )
    if json_data is not None:
        cols[2].download_button(
            "JSON",
            data=json_payload(json_data),
            file_name=f"{name}.json",
            mime="application/json",
            key=f"dl_json_{key}",
            on_click="ignore",
            icon=":material/data_object:",
        )
