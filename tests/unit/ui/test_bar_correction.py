"""The extraction bar on the page says a new estimate once its run is outside the announced band,
and keeps it (ui/work/queue.py)."""

from __future__ import annotations

from isoscope.engine.budget.progress import LiveCorrection


def test_the_bar_on_the_page_keeps_the_new_estimate_once_said():
    from isoscope.engine.serve.flights import WaitState
    from isoscope.ui.work.queue import _wait_text

    correction = LiveCorrection(announced_s=10.0)
    texts = []
    for done in range(1, 5):
        state = WaitState("k", True, 0, 1, done, 10, "x")
        texts.append(_wait_text(state, "Extracting:", "texts", done * 3.0, 10.0, correction))
    assert "taking longer than announced" not in texts[0]
    assert all("taking longer than announced: about 30 s in all, not 10 s" in t for t in texts[1:])
    calm = LiveCorrection(announced_s=10.0)
    state = WaitState("k", True, 0, 1, 5, 10, "x")
    assert "announced" not in _wait_text(state, "Extracting:", "texts", 5.0, 10.0, calm)
