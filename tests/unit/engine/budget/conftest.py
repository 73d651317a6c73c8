"""What the budget's tests share: a machine with a known cache knee and no fixed extraction cost."""

from __future__ import annotations

import pytest

from isoscope.engine.budget import throughput


@pytest.fixture
def known_cache(monkeypatch):
    """The cache knee of a machine with a 4 GB last-level cache, whatever this machine has; no
    fixed extraction cost unless a test sets one (it has its own test)."""
    monkeypatch.setattr(throughput, "cache_knee", lambda device: 10**9)
    monkeypatch.setattr(throughput, "EXTRACTION_FIXED_S", 0.0)
