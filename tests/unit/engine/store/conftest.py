"""What the store's tests share: no cache limit but the default, whatever the environment says."""

from __future__ import annotations

import pytest

from isoscope.engine.store.limit import set_process_limit


@pytest.fixture
def no_process_limit(monkeypatch):
    monkeypatch.delenv("ISOSCOPE_CACHE_LIMIT", raising=False)
    set_process_limit(None)
    yield
    set_process_limit(None)
