"""Integration-tier helpers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clirun import run_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def run_analyze():
    """``run_analyze(*args, cache_dir=...)``: ``isoscope analyze`` in a subprocess, as a user runs it."""

    def run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
        return run_backend("analyze", *args, cache_dir=cache_dir, timeout=300)

    return run
