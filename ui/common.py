"""Shared Streamlit glue: the selection, cached model/extraction loaders, downloads, errors.

The sidebar that sets the selection is ui/sidebar.py; typed cached analyses are ui/cached.py.

Caching: models in ``st.cache_resource`` keyed by cheap values (source, device, dtype, pickle
opt-in, head) with a small ``max_entries``; extraction results in a process-wide LRU keyed by
(model fingerprint, corpus hash, settings) and on disk (backend.engine.cache), so a restart is instant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from backend.engine.cache import ResultCache, cache_key, cached_extract
from backend.engine.corpus import Corpus, bundled_corpus, corpus_from_bytes, corpus_from_text
from backend.engine.environment import quiet_libraries, use_offline_environment
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import ExtractionResult, ExtractionSettings
from backend.engine.jsonio import strict_json
from backend.engine.lru import LRU
from backend.engine.models import LoadedModel, load_model
from ui.progress import progress_bar
from ui.saved import open_saved, saved_corpus, saved_model, saved_selection
from ui.session import SELECTION_KEY

use_offline_environment()


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


@st.cache_resource(max_entries=3, show_spinner="Loading model…")
def _load_model_cached(
    source: str, device: str, dtype: str, allow_pickle: bool, head: str
) -> LoadedModel:
    _quiet()
    return load_model(source, device=device, dtype=dtype, allow_pickle=allow_pickle, head=head)


def get_model(
    selection: Selection | None = None, head: str = "base", source: str | None = None
) -> LoadedModel:
    """The selected model (or ``source``), cached per (source, device, dtype, pickle, head)."""
    sel = selection or get_selection()
    return _load_model_cached(
        source or sel.model_source, sel.device, sel.dtype, sel.allow_pickle, head
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
    sel = selection or get_selection()
    if sel.corpus_kind == "paste":
        return corpus_from_text(sel.corpus_text)
    if sel.corpus_kind == "upload":
        stored = _uploaded_store().get(sel.corpus_file_sha)
        if stored is None:
            raise IsoscopeError("the uploaded file is no longer in memory; upload it again")
        return corpus_from_bytes(stored[1], stored[0])
    return bundled_corpus()


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


def get_extraction(
    selection: Selection | None = None, source: str | None = None
) -> tuple[LoadedModel, ExtractionResult]:
    """Model + extraction for the selection: this process's memory, else
    :func:`backend.engine.cache.cached_extract` (disk cache, else a run with a progress bar)."""
    sel = selection or get_selection()
    saved = open_saved() if selection is None else None  # a saved analysis replaces the run
    if saved is not None and source in (None, saved.model.get("source")):
        return saved_model(saved, lambda source: get_model(source=source)), saved
    loaded = get_model(sel, source=source)
    corpus = saved_corpus(saved) if saved is not None else get_corpus(sel)
    key = extraction_key(loaded, corpus, sel.settings)
    store = _extraction_store()
    result = store.get(key)
    if result is None:
        disk = ResultCache()
        label = f"Extracting hidden states of {loaded.info.display_name}:"
        # no bar for a disk hit; a result that nothing could keep carries one notice saying so
        bar = nullcontext(None) if disk.path(key).exists() else progress_bar(label, "texts")
        with bar as progress:
            result = cached_extract(loaded, corpus, sel.settings, progress, cache=disk)
        store.put(key, result)
    return loaded, result


def memo(name: str, key_parts: tuple, compute: Callable[[], Any]) -> Any:
    """Process-wide memo for derived analyses: ``key_parts`` must identify the inputs fully
    (use :func:`extraction_key` of the result plus the parameters)."""
    key = hashlib.sha256(repr((name, key_parts)).encode()).hexdigest()
    store = _memo_store()
    value = store.get(key)
    if value is None:
        value = compute()
        store.put(key, value)
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
    """Rerun through app.py when Streamlit ran a page file on its own.

    Because ``pages/`` sits next to ``app.py``, Streamlit starts in its old multipage mode and, until
    some session has called ``st.navigation``, serves a deep link (``/outliers`` right after a server
    start, and every AppTest rerun) by running the page file alone: no sidebar, no frame. Switching
    the flag that ``st.navigation`` itself clears and rerunning runs app.py on the same page.
    """
    # a private Streamlit module, needed only by this workaround: imported where it is used
    from streamlit.runtime.pages_manager import PagesManager

    if getattr(PagesManager, "uses_pages_directory", False):  # private flag: absent = nothing to do
        PagesManager.uses_pages_directory = False
        st.rerun()


# ----------------------------------------------------------------------------- page helpers


def load_or_stop(source: str | None = None) -> tuple[LoadedModel, ExtractionResult]:
    """Model + extraction for the page, or an actionable error and ``st.stop()``."""
    try:
        return get_extraction(source=source)
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this selection.** {exc}")
        st.info("Change the model or corpus in the sidebar and press **Run analysis**.")
        st.stop()
        raise  # st.stop() raises; keeps type checkers happy


def show_notices(result: ExtractionResult) -> None:
    for notice in result.notices:
        st.caption(f"ℹ️ {notice}")


def explainer(title: str, body_md: str, expanded: bool = False) -> None:
    """'What is this / reference' expander every view carries (METHODS.md: cite the source)."""
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
