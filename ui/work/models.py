"""The selected model, loaded once per server process: a Hub id downloaded first behind a bar in
bytes, then the load under a spinner that says how long the first page will take; every load
goes through the shared server's access rules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import streamlit as st

from isoscope.engine.budget.page_budget import first_look_budget
from isoscope.engine.budget.time_estimate import TimeEstimate
from isoscope.engine.environment import quiet_libraries
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.load.models import LoadedModel, load_model
from isoscope.engine.load.source import source_label
from isoscope.engine.store.cache import ResultCache
from isoscope.ui.frame.selection import Selection, get_selection
from isoscope.ui.server import access
from isoscope.ui.work.corpora import get_corpus


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
    quiet_libraries()
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
    (:func:`isoscope.engine.budget.time_estimate.time_preflight`; returned, for the load's spinner).
    Streamlit's stop ends the script in the bar's update, which cancels the download (complete
    files stay; nothing half-written)."""
    from isoscope.engine.budget import throughput
    from isoscope.engine.load import hub
    from isoscope.engine.load.preflight import once

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
    :class:`isoscope.engine.budget.time_estimate.TimeEstimate` on the selected corpus to ``show`` (None
    when the corpus is bad: the extraction says why)."""
    from isoscope.engine.budget import time_estimate
    from isoscope.engine.budget.batching import Batching

    try:
        corpus = get_corpus(sel)
    except IsoscopeError:
        return None
    root = ResultCache().root
    batching = Batching.of(sel.settings)
    return time_estimate.time_preflight(
        root, sel.device, corpus, sel.settings.max_length, show, batching
    )


def get_model(
    selection: Selection | None = None, head: str = "base", source: str | None = None
) -> LoadedModel:
    """The selected model (or ``source``), cached per (source, device, dtype, pickle, head).

    Every model the UI loads comes through here, so a shared server's rules apply to all of them
    (sidebar, links, Compare's model B): a source outside them is refused with one text, and
    pickle weights are never allowed (:mod:`isoscope.ui.server.access`). While a load runs, its spinner says how
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
