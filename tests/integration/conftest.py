"""Integration-tier helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def run_analyze():
    """``run_analyze(*args, cache_dir=...)``: ``python -m backend analyze`` in a subprocess, as a user runs it."""

    def run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ISOSCOPE_CACHE_DIR": str(cache_dir),
        }
        return subprocess.run(
            [sys.executable, "-m", "backend", "analyze", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run
