"""The one progress protocol of isoscope: ``progress(done, total)``.

Every long computation (extraction, scans, ablations, comparisons, reports, exports) takes an
optional ``progress`` callable and calls it with the units done so far and the total units of the
current step. A callable may return ``False`` to ask the computation to stop after the current
unit; computations that cannot stop early ignore the return value. The Streamlit bar of the
server's shared work (``isoscope.ui.work.queue.shared_run``) and the CLI's stderr line
(``isoscope.commands.common.ProgressPrinter``) are the two implementations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from isoscope.engine.budget.estimates import describe_seconds


class Progress(Protocol):
    def __call__(self, done: int, total: int, /) -> bool | None: ...


def report(progress: Progress | None, done: int, total: int) -> bool:
    """Call ``progress`` if given; ``True`` unless it asked to stop (returned ``False``)."""
    return progress is None or progress(done, total) is not False


def counter(progress: Progress | None, total: int) -> Callable[..., None]:
    """``advance(n=1)``: ``n`` more of ``total`` units done, reported to ``progress`` (if given)
    with the running count, for a computation whose units come from several loops."""
    done = [0]

    def advance(n: int = 1) -> None:
        done[0] += n
        if progress is not None:
            progress(done[0], total)

    return advance


def eta_seconds(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the mean rate so far: the throughput measured on this device, refined
    with every report (None before the first unit is done)."""
    if done <= 0 or elapsed_s <= 0 or total <= 0:
        return None
    return max(0.0, (total - done) * elapsed_s / done)


def eta_text(done: int, total: int, elapsed_s: float, estimate_s: float | None = None) -> str:
    """``" · about 42 s left"`` (or ``""`` before an estimate exists). Before the first unit is
    done, ``estimate_s`` (the preflight's estimate of the whole run) less the time elapsed."""
    eta = eta_seconds(done, total, elapsed_s)
    if eta is None and estimate_s is not None and total > 0:
        eta = max(0.0, estimate_s - elapsed_s)
    if eta is None or done >= total:
        return ""
    return f" · {describe_seconds(eta)} left"


# A run whose projected time falls outside these multiples of what was announced says so once.
CORRECTION_BAND = (0.7, 1.4)
MIN_CORRECTION_REPORTS = 2  # the first batch alone also pays the first pass's warm-up


def correction_text(announced_s: float, projected_s: float) -> str | None:
    """``"taking longer than announced: about 95 s in all, not 52 s"`` (or ``"faster than
    announced: ..."``) when ``projected_s`` is outside :data:`CORRECTION_BAND` of
    ``announced_s``; None inside it."""
    if announced_s <= 0 or projected_s <= 0:
        return None
    low, high = CORRECTION_BAND
    ratio = projected_s / announced_s
    if low <= ratio <= high:
        return None
    how = "taking longer than announced" if ratio > high else "faster than announced"
    before = describe_seconds(announced_s).removeprefix("about ")
    return f"{how}: {describe_seconds(projected_s)} in all, not {before}"


class LiveCorrection:
    """Reads a run's progress against what was announced and says a new estimate once.

    ``announced_s``: the announced seconds of the whole wait; ``before_s``: the seconds of it
    already spent when the run started (the load, for a first page); ``shares``: the run's
    share of work done after each count of units (the extraction's padded tokens,
    :func:`isoscope.engine.budget.batching.work_shares`; empty: the units are equal). From the
    :data:`MIN_CORRECTION_REPORTS`-th report on, the projected total is ``before_s`` + the
    seconds so far / the share done; :meth:`check` returns :func:`correction_text` the first
    time it is outside the band, then None for good."""

    def __init__(
        self, announced_s: float, before_s: float = 0.0, shares: tuple[float, ...] = ()
    ) -> None:
        self.announced_s = announced_s
        self.before_s = max(0.0, before_s)
        self.shares = shares
        self.reports = 0  # distinct counts reported (a bar redrawn at the same count is one)
        self.last_done = 0
        self.said: str | None = None

    def share(self, done: int, total: int) -> float:
        if self.shares:
            return self.shares[min(done, len(self.shares) - 1)]
        return done / total if total > 0 else 0.0

    def projected(self, done: int, total: int, elapsed_s: float) -> float | None:
        """The whole wait's seconds at the rate so far; None before any work is done."""
        share = self.share(done, total)
        if share <= 0 or elapsed_s <= 0:
            return None
        return self.before_s + elapsed_s / share

    def check(self, done: int, total: int, elapsed_s: float) -> str | None:
        """The correction to say now (once in a run), or None."""
        if self.said is not None or done <= 0 or done >= total:
            return None
        if done != self.last_done:
            self.reports, self.last_done = self.reports + 1, done
        projected = self.projected(done, total, elapsed_s)
        if self.reports < MIN_CORRECTION_REPORTS or projected is None:
            return None
        self.said = correction_text(self.announced_s, projected)
        return self.said
