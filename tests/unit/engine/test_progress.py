"""The one progress protocol: ``progress(done, total)``, returning False to ask for a stop."""

from __future__ import annotations

from backend.engine.progress import Progress, report


def test_report_calls_the_callback_and_reads_a_stop_request():
    seen: list[tuple[int, int]] = []

    def keep_going(done: int, total: int) -> None:
        seen.append((done, total))

    def stop(done: int, total: int) -> bool:
        return False

    assert report(keep_going, 1, 4) is True
    assert seen == [(1, 4)]
    assert report(stop, 2, 4) is False
    assert report(None, 3, 4) is True


def test_plain_functions_satisfy_the_protocol():
    def bar(done: int, total: int) -> bool | None:
        return None

    progress: Progress = bar  # a type checker accepts it; at run time it is just a callable
    assert report(progress, 0, 1)
