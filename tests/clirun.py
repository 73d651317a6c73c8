"""Run ``python -m backend ...`` in a subprocess as a user does (offline, an isolated cache)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from backend.engine.environment import offline_env

ROOT = Path(__file__).resolve().parent.parent


def run_backend(*args: str, cache_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m backend ARGS`` from the repository root with ``ISOSCOPE_CACHE_DIR=cache_dir``."""
    return subprocess.run(
        [sys.executable, "-m", "backend", *args],
        cwd=ROOT,
        env=offline_env(ISOSCOPE_CACHE_DIR=str(cache_dir)),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
