"""Warm up compiled kernels off the request path: first the statistics kernel that later
extractions use on the CPU (:class:`isoscope.engine.extraction.kernel.MomentsKernel`, seconds), then UMAP,
whose numba kernels compile on the first fit in a process (the longer of the two).
:func:`start_umap_warmup` starts one daemon thread per process that runs both; pages read its
state and offer PCA meanwhile. The extraction that shows the first page runs eagerly.

The first page must not wait for it: app.py starts the warm-up only after the first page has
rendered, and the thread lowers its own scheduling priority (Linux: a per-thread nice value of
19), so later page runs win the CPU. Compiled kernels that numba can cache go to
``NUMBA_CACHE_DIR``, inside the isoscope cache (:func:`isoscope.engine.environment.use_kernel_caches`).

Set ``ISOSCOPE_UMAP_WARMUP=0`` to skip the warm-up (tests do, to keep the CPU free); UMAP then
compiles on its first real fit instead, and extractions of small corpora stay eager.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import streamlit as st

# The compile time the progress bar assumes: between what an idle and a busy small CPU take
# (docs/performance.md, "Projections").
EXPECTED_SECONDS = 90.0


@dataclass
class WarmupState:
    """Progress of the background UMAP compilation (shared by every session of the process)."""

    enabled: bool = True
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    seconds: float | None = None
    error: str | None = None

    @property
    def ready(self) -> bool:
        """True when a UMAP fit will not pay the compile cost (or warm-up is off / failed)."""
        return self.done.is_set() or not self.enabled

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def fraction(self) -> float:
        return 1.0 if self.ready else min(self.elapsed / EXPECTED_SECONDS, 0.95)


def _lower_priority() -> None:
    """Nice this thread (not the process) to 19 where the OS allows it (Linux threads have their
    own nice value); elsewhere a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def _run(state: WarmupState) -> None:
    from isoscope.engine.environment import use_kernel_caches

    use_kernel_caches()  # before numba's first import
    _lower_priority()
    try:
        from isoscope.engine.extraction.kernel import MOMENTS

        MOMENTS.compile()  # off or failed (MOMENTS.error): extractions stay eager
        state.started = time.monotonic()  # UMAP's progress bar counts from here
        from isoscope.analysis.projections.methods import warm_up_umap

        state.seconds = warm_up_umap()
    except (
        Exception
    ) as exc:  # never kill the process: UMAP will then compile (or fail) on first use
        state.error = f"{type(exc).__name__}: {exc}"
    finally:
        state.done.set()


@st.cache_resource(max_entries=1, show_spinner=False)
def start_umap_warmup() -> WarmupState:
    """Start the UMAP warm-up thread once per process; every later call returns its state."""
    enabled = os.environ.get("ISOSCOPE_UMAP_WARMUP", "1") not in ("0", "false", "no")
    state = WarmupState(enabled=enabled)
    if enabled:
        threading.Thread(
            target=_run, args=(state,), name="isoscope-umap-warmup", daemon=True
        ).start()
    return state
