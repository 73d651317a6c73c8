"""Shared work on one server in the UI: identical work runs once across every session, heavy
work waits in the process's fair queue (:mod:`isoscope.engine.serve.flights`) behind a bar that
says its place, then the shared progress.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from isoscope.engine.budget.progress import LiveCorrection, eta_text
from isoscope.engine.serve.flights import WaitState, WorkQueue
from isoscope.ui.server import access

T = TypeVar("T")


def _workers() -> int:
    raw = os.environ.get("ISOSCOPE_WORKERS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else (os.cpu_count() or 1)


# One per server process (a module is imported once, whatever the number of sessions): identical
# work runs once, heavy work waits in a fair queue of at most ISOSCOPE_WORKERS runs at a time.
WORK = WorkQueue(workers=_workers())


def session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def _wait_text(
    state: WaitState,
    label: str,
    unit: str,
    running_s: float = 0.0,
    estimate_s: float | None = None,
    correction: LiveCorrection | None = None,
) -> str:
    """The bar's text: the place in the queue, then the progress with its ETA; with
    ``correction``, the new estimate once the run is outside the announced band (said once,
    then kept on the bar to the end)."""
    if not state.running:
        ahead = state.ahead + state.busy
        noun = "analysis" if ahead == 1 else "analyses"
        return f"Waiting: {ahead} {noun} ahead of you · {label}"
    if state.total:
        suffix = f" {unit}" if unit else ""
        eta = eta_text(state.done, state.total, running_s, estimate_s)  # measured throughput
        if correction is not None:
            correction.check(state.done, state.total, running_s)
        said = "" if correction is None or correction.said is None else f" · {correction.said}"
        return f"{label} {state.done:,} / {state.total:,}{suffix}{eta}{said}"
    return f"{label} …"


def shared_run(
    key: str,
    label: str,
    compute: Callable[[Callable[[int, int], bool]], T],
    *,
    heavy: bool = True,
    unit: str = "",
    estimate_s: float | None = None,
    shares: tuple[float, ...] = (),
) -> T:
    """``compute(progress)`` once per ``key`` across every session of this server (see
    :mod:`isoscope.engine.serve.flights`): a heavy one in the fair queue's worker threads (it must not
    call Streamlit), a light one in the first caller's thread. A session that waits sees a bar
    with its place in the queue, then the shared progress; closing the tab or changing a control
    leaves the queue without cancelling what others wait for. With ``estimate_s`` (the
    estimate the label announced; ``shares``: the work done after each count of units), a
    rate that puts the run outside the announced band adds the new estimate to the bar, once
    (:class:`isoscope.engine.budget.progress.LiveCorrection`)."""
    correction = None if estimate_s is None else LiveCorrection(estimate_s, 0.0, shares)
    bar = None
    shown: tuple[float, str] | None = None
    running_since: float | None = None

    def on_wait(state: WaitState) -> None:
        nonlocal bar, shown, running_since, correction
        if state.running and running_since is None:
            running_since = time.monotonic()
            if state.done > 0:  # joined a run under way: its start, and so its rate, is unknown
                correction = None
        running_s = time.monotonic() - running_since if running_since is not None else 0.0
        text = _wait_text(state, label, unit, running_s, estimate_s, correction)
        fraction = min(state.done / state.total, 1.0) if state.running and state.total else 0.0
        if (fraction, text) == shown:  # 30 waiters re-sending an unchanged bar cost the server
            return
        shown = (fraction, text)
        if bar is None:
            bar = st.progress(fraction, text=text)
        else:
            bar.progress(fraction, text=text)

    owner = session_id()
    if heavy and not WORK.in_flight(key):
        access.check_run_allowed()  # a shared server's runs-per-minute limit per visitor (joining is free)
    try:
        return WORK.run(key, compute, owner=owner, heavy=heavy, label=label, on_wait=on_wait)
    finally:
        if bar is not None:
            bar.empty()
