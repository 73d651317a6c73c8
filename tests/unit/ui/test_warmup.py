"""The warm-up's state: ready when done or switched off, a progress fraction that never reaches 1
before it is done, and a failure that is recorded instead of killing the process."""

from __future__ import annotations

import time

import pytest

import isoscope.ui.server.warmup as warmup
from isoscope.ui.server.warmup import EXPECTED_SECONDS, WarmupState


def test_ready_when_done_or_disabled():
    state = WarmupState()
    assert not state.ready
    state.done.set()
    assert state.ready and state.fraction() == 1.0
    assert WarmupState(enabled=False).ready


def test_fraction_grows_with_time_and_stops_at_95_percent():
    state = WarmupState(started=time.monotonic() - EXPECTED_SECONDS / 2)
    assert state.fraction() == pytest.approx(0.5, abs=0.01)
    assert WarmupState(started=time.monotonic() - 10 * EXPECTED_SECONDS).fraction() == 0.95


def test_a_failing_warmup_is_recorded_and_marks_done(monkeypatch):
    import isoscope.engine.environment as environment
    import isoscope.engine.extraction.kernel as kernel

    class Broken:
        def compile(self):
            raise RuntimeError("planted")

    monkeypatch.setattr(environment, "use_kernel_caches", lambda: None)
    monkeypatch.setattr(warmup, "_lower_priority", lambda: None)
    monkeypatch.setattr(kernel, "MOMENTS", Broken())
    state = WarmupState()
    warmup._run(state)
    assert state.done.is_set() and state.error == "RuntimeError: planted" and state.seconds is None
