"""Run ``python -m isoscope ...`` in a subprocess as a user does (offline, an isolated cache)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from isoscope.engine.environment import offline_env

ROOT = Path(__file__).resolve().parent.parent


def run_backend(*args: str, cache_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m isoscope ARGS`` from the repository root with ``ISOSCOPE_CACHE_DIR=cache_dir``."""
    return subprocess.run(
        [sys.executable, "-m", "isoscope", *args],
        cwd=ROOT,
        env=offline_env(ISOSCOPE_CACHE_DIR=str(cache_dir)),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


THREE_TEXTS = "Summer is warm. Winter is cold.\nThe cat sat on the mat.\nA third text\n"


def argv_over(base: dict[str, str], given: tuple[str, ...]) -> list[str]:
    """``base`` options with ``given`` (``("--flag", "value", ...)``) replacing or adding some."""
    merged = base | dict(zip(given[::2], given[1::2], strict=True))
    return [x for option, value in merged.items() for x in (option, value)]


def one_line_error(proc: subprocess.CompletedProcess, needle: str) -> list[str]:
    """Assert the CLI contract for bad input: exit 2, no traceback, and a last stderr line
    ``error: ...`` naming ``needle``. Returns the stderr lines."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error:") and needle in lines[-1], lines[-1]
    return lines
