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
    def __call__(self, done: int, total: int) -> bool | None: ...


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
