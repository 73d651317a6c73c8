"""The one progress protocol of isoscope: ``progress(done, total)``.

Every long computation (extraction, scans, ablations, comparisons, reports, exports) takes an
optional ``progress`` callable and calls it with the units done so far and the total units of the
current step. A callable may return ``False`` to ask the computation to stop after the current
unit; computations that cannot stop early ignore the return value. The Streamlit bar of the
server's shared work (``ui.common.shared_run``) and the CLI's stderr line
(``backend.commands.common.ProgressPrinter``) are the two implementations.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, done: int, total: int) -> bool | None: ...


def report(progress: Progress | None, done: int, total: int) -> bool:
    """Call ``progress`` if given; ``True`` unless it asked to stop (returned ``False``)."""
    return progress is None or progress(done, total) is not False
