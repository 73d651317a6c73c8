"""Open a saved analysis in the dashboard: sidebar "Open a saved analysis", by upload or by path.

While one is open, :func:`isoscope.ui.work.extraction.get_extraction` returns it (no model, no extraction), the
selection reports its model and settings, and ``loaded`` is a :class:`isoscope.engine.store.saved.SavedModel`:
its card and fingerprint come from the file; a view that needs the model itself (per-text
states, sentence similarity, LayerNorm ablation, position probe, TUPE, sinks...) loads it on
first use if its source is available here (with the saved fingerprint), else says so. Pressing
"Run analysis" or "Close" returns to live analyses.

Saved results live in a process-wide store (the last two opened); the session keeps only a key.
Written by ``isoscope analyze ... --save RUN.isoscope`` (backend/engine/store/saved.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.lru import LRU
from isoscope.engine.store.saved import SavedModel, load_saved, read_saved_bytes
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.server import access
from isoscope.ui.widgets.upload import file_upload

SAVED_KEY = "isoscope_saved"  # session_state slot of the open saved analysis (an OpenSaved)
STORE_SIZE = 2


@dataclasses.dataclass(frozen=True)
class OpenSaved:
    """Which saved analysis this session shows: its store key, label, and where it came from."""

    key: str
    name: str
    path: str  # "" for an upload
    selection_id: int  # id() of the selection when it was opened: a new selection closes it


@st.cache_resource(max_entries=1, show_spinner=False)
def _store() -> LRU:
    """Saved analyses opened in this process (shared by sessions, keyed by content/path)."""
    return LRU(STORE_SIZE)


# ----------------------------------------------------------------------------- opening


def open_path(path: str) -> OpenSaved:
    """Open the saved analysis at ``path`` (zip or folder) for this session."""
    p = Path(path.strip()).expanduser()
    stat = p.stat() if p.exists() else None
    key = (
        "path:" + hashlib.sha256(f"{p.resolve()}|{stat and stat.st_mtime_ns}".encode()).hexdigest()
    )
    result = _store().get(key) or load_saved(p)
    _store().put(key, result)
    return _remember(OpenSaved(key, p.name, str(p), _selection_id()))


def open_upload(name: str, raw: bytes) -> OpenSaved:
    """Open an uploaded saved analysis (the bytes of its zip) for this session."""
    key = "upload:" + hashlib.sha256(raw).hexdigest()
    limit = access.policy().upload_limit_bytes  # its members decompress within the upload limit
    result = _store().get(key) or read_saved_bytes(raw, name, max_bytes=limit)
    _store().put(key, result)
    return _remember(OpenSaved(key, name, "", _selection_id()))


def close_saved() -> None:
    st.session_state.pop(SAVED_KEY, None)


def _selection_id() -> int:
    return id(st.session_state.get(SELECTION_KEY))


def _remember(opened: OpenSaved) -> OpenSaved:
    st.session_state[SAVED_KEY] = opened
    return opened


def open_saved() -> ExtractionResult | None:
    """The saved analysis this session shows, or None (closed once a new selection was run)."""
    opened: OpenSaved | None = st.session_state.get(SAVED_KEY)
    if opened is None:
        return None
    if opened.selection_id != _selection_id():  # "Run analysis" chose a new selection
        close_saved()
        return None
    result = _store().get(opened.key)
    if result is None and opened.path:  # evicted by other sessions: read it again
        try:
            result = load_saved(opened.path)
        except IsoscopeError:
            result = None
        if result is not None:
            _store().put(opened.key, result)
    if result is None:
        close_saved()
        st.warning(
            f"The saved analysis {literal(opened.name)} is no longer in memory; open it again."
        )
    return result


def saved_selection(selection: Any) -> Any:
    """``selection`` with the open saved analysis's model and settings (unchanged when none)."""
    result = open_saved()
    if result is None:
        return selection
    source = str(result.model.get("source") or selection.model_source)
    dtype = str(result.model.get("dtype") or selection.dtype)
    changes: dict[str, Any] = {"model_source": source, "settings": result.settings}
    if dtype in ("float32", "bfloat16"):
        changes["dtype"] = dtype
    return dataclasses.replace(selection, **changes)


def saved_corpus(result: ExtractionResult) -> Corpus:
    """The saved analysis's texts as a corpus (for views that run another model on them)."""
    return Corpus(result.texts, result.corpus_name)


def saved_model(result: ExtractionResult, load_model: Callable[[str], Any]) -> SavedModel:
    """The stand-in ``loaded`` of a saved analysis: ``load_model(source)`` loads the real model
    only when a view needs it."""
    return SavedModel(result, lambda: _load_real_model(result, load_model))


def _load_real_model(result: ExtractionResult, load_model: Callable[[str], Any]):
    source = str(result.model.get("source") or "")
    st.info(
        f"This view needs the model itself, which a saved analysis does not hold: loading "
        f"**{literal(source)}** on this machine.",
        icon=":material/memory:",
    )
    return load_model(source)


# ----------------------------------------------------------------------------- the sidebar


def saved_panel() -> None:
    """Sidebar section "Open a saved analysis" (upload or path); shows and closes the open one."""
    result = open_saved()
    opened: OpenSaved | None = st.session_state.get(SAVED_KEY)
    with st.expander(
        "Open a saved analysis", expanded=result is not None, icon=":material/folder_open:"
    ):
        if result is not None and opened is not None:
            st.success(
                f"Showing **{literal(opened.name)}**: {literal(result.model.get('display_name', '?'))} on "
                f"{literal(result.corpus_name)} ({result.num_texts:,} texts, {result.num_tokens:,} tokens), "
                f"saved settings. Views that need the model load it if it is available here.",
                icon=":material/inventory_2:",
            )
            if st.button("Close saved analysis", key="saved_close", width="stretch"):
                close_saved()
                st.rerun()
        upload = file_upload(
            "Saved analysis (.isoscope)",
            type=["isoscope", "zip"],
            key="saved_upload",
            help="Written by `isoscope analyze ... --save RUN.isoscope`.",
        )
        rules = access.policy()
        path = ""
        if rules.server_paths:  # a shared server opens uploads only, never a path on it
            path = st.text_input(
                "…or its path on this machine",
                key="saved_path",
                placeholder="/data/runs/run.isoscope (a .isoscope file or folder)",
            )
        if st.button("Open", key="saved_open", width="stretch"):
            try:
                if upload is not None:
                    open_upload(upload.name, upload.getvalue())
                elif path.strip():
                    open_path(path)
                else:
                    st.error(
                        "Choose a .isoscope file or type its path first."
                        if rules.server_paths
                        else "Choose a .isoscope file first."
                    )
                    return
            except IsoscopeError as exc:
                st.error(f"**Cannot open this saved analysis.** {message(exc)}")
                return
            st.rerun()
