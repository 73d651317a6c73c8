"""Sidebar section for the disk cache ("1.2 of 5 GiB", the limit, a clear button) and the sidebar
control of the token sample's memory budget.

The limit is process-wide (:func:`isoscope.engine.store.limit.set_process_limit`): it applies to every session
of this server and to every cache write in this process, because the cache folder is shared. It
starts from ``$ISOSCOPE_CACHE_LIMIT`` or 5 GiB. Rules of the cache (what is counted, what is
evicted, what is never evicted): backend/engine/store/cache.py.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.store.cache import MODELS_DIR, ResultCache, default_cache_dir
from isoscope.engine.store.limit import (
    GIB,
    CacheUsage,
    default_cache_limit,
    format_size,
    format_usage,
    set_process_limit,
)
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import code, message
from isoscope.ui.server import access

# Token-sample memory budgets offered in the sidebar (bytes), and their labels.
SAMPLE_BUDGETS = {
    "256 MiB": 256 * 1024**2,
    "512 MiB": 512 * 1024**2,
    "1 GiB": GIB,
    "2 GiB": 2 * GIB,
    "4 GiB": 4 * GIB,
}


@st.cache_data(ttl=5, max_entries=4, show_spinner=False)
def _usage(root: str) -> CacheUsage:
    """The cache's use, walked at most once per ``ttl``: the walk (every file of every cached
    analysis and converted model) would otherwise slow each rerun of every page. Cleared on a
    clear or a new limit."""
    return ResultCache(root).usage()


def _apply_limit() -> None:
    gib = st.session_state.get("sb_cache_limit_gib")
    if gib is None:
        return
    set_process_limit(int(round(float(gib) * GIB)))
    ResultCache().enforce_limit()  # a lowered limit applies at once
    _usage.clear()


def _clear() -> None:
    try:
        st.session_state["sb_cache_cleared"] = ResultCache().clear()
    except IsoscopeError as exc:
        st.session_state["sb_cache_cleared"] = str(exc)
    _usage.clear()


@fragment
def cache_panel() -> None:
    """The 'Disk cache' sidebar section: use against the limit, the limit, a clear button.

    A fragment: changing the limit or clearing reruns this section only, not the page."""
    try:
        limit = default_cache_limit()
    except IsoscopeError as exc:  # a malformed $ISOSCOPE_CACHE_LIMIT
        st.error(message(exc))
        return
    usage = _usage(str(default_cache_dir()))
    st.progress(
        min(usage.total / max(limit, 1), 1.0),
        text=f"Disk cache: {format_usage(usage.total, limit)}",
    )
    if access.shared():  # the limit and clearing are the operator's (CLI and environment)
        st.caption("Shared server: the cache is managed by its operator.")
        return
    with st.expander("Disk cache settings", expanded=False):
        parts = [f"{usage.results_count} cached analyses, {format_size(usage.results_bytes)}"]
        if usage.spill_count:
            parts.append(
                f"{usage.spill_count} spilled states (every token of one state) "
                f"{format_size(usage.spill_bytes)}"
            )
        if usage.models_bytes:
            parts.append(f"converted models ({MODELS_DIR}/) {format_size(usage.models_bytes)}")
        if usage.temp_bytes:
            parts.append(f"being written {format_size(usage.temp_bytes)}")
        if usage.other_bytes:
            parts.append(f"other files {format_size(usage.other_bytes)}")
        if usage.refused_count:  # entries that were not their key's (isoscope.engine.store.cache)
            parts.append(f"{usage.refused_count} {usage.refused_line()}")
        st.caption(" · ".join(parts) + f"  \nFolder: {code(usage.root)}")
        st.number_input(
            "Limit (GiB)",
            min_value=0.0,
            max_value=1024.0,
            value=round(limit / GIB, 2),
            step=0.5,
            key="sb_cache_limit_gib",
            on_change=_apply_limit,
            help="Least recently used analyses (and spilled states of every token) are deleted "
            "when the cache grows past this. "
            "Converted models count towards it but are never deleted automatically. Applies to "
            "every session of this server; set ISOSCOPE_CACHE_LIMIT (e.g. 500M, 5G) to start "
            "with another value. An analysis larger than the limit is shown but not kept.",
        )
        st.button(
            "Clear cached analyses",
            key="sb_cache_clear",
            icon=":material/delete:",
            on_click=_clear,
            help="Deletes every cached analysis and spilled state on disk (not the converted "
            "models, not files "
            "being written). Analyses already in memory stay until the server restarts.",
        )
        cleared = st.session_state.pop("sb_cache_cleared", None)
        if isinstance(cleared, str):
            st.error(message(cleared))
        elif cleared is not None:
            st.success(f"Cleared {cleared[0]} cached analyses ({format_size(cleared[1])}).")


def sample_budget_input(current: ExtractionSettings) -> dict[str, Any]:
    """Sidebar control of the token sample's memory budget -> ``{"sample_budget_bytes": ...}``.

    The sample is (states x tokens x width) float32; the extraction keeps as many tokens per state
    as fit (the page then says e.g. "4,000 tokens per state to stay within 1 GiB")."""
    budget = getattr(current, "sample_budget_bytes", None)
    if budget is None:  # an ExtractionSettings without the field: nothing to set
        return {}
    labels = list(SAMPLE_BUDGETS)
    values = list(SAMPLE_BUDGETS.values())
    if budget not in values:
        labels.append(format_size(budget))
        values.append(budget)
    label = st.select_slider(
        "Token-sample memory budget",
        labels,
        value=labels[values.index(budget)],
        key="sb_sample_budget",
        help="The token sample (hidden states x tokens x width, float32) stays within this "
        "memory; on wide, deep models fewer tokens are kept and the page says how many.",
    )
    return {"sample_budget_bytes": int(values[labels.index(label)])}


def budget_label(settings: ExtractionSettings) -> str:
    """`` · sample within 512 MiB`` when the sample budget is not the default, else ``""``."""
    budget = getattr(settings, "sample_budget_bytes", None)
    if budget is None or budget == ExtractionSettings().sample_budget_bytes:
        return ""
    return f" · sample within {format_size(budget)}"
