"""One progress helper for every long computation of the UI: a bar that exists only while work
runs, fed by the ``progress(done, total)`` callbacks of backend functions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

Progress = Callable[[int, int], None]


@contextmanager
def progress_bar(label: str, unit: str = "") -> Iterator[Progress]:
    """A Streamlit progress bar for the block; yields the ``progress(done, total)`` callback.

    The text reads "<label> <done> / <total> <unit>"; the bar is removed when the block ends
    (also on an exception)."""
    bar = st.progress(0.0, text=label)
    suffix = f" {unit}" if unit else ""

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{label} {done:,} / {total:,}{suffix}")

    try:
        yield progress
    finally:
        bar.empty()
