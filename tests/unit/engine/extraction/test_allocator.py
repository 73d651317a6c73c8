"""The allocator keeps freed memory for reuse during CPU extractions (glibc): a block freed and
allocated again is not faulted in again; off by the environment; a no-op elsewhere. Each case
runs in a fresh interpreter, since the setting is process-wide."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from backend.engine.environment import app_dir

PROBE = """
import json, resource, numpy as np
from backend.engine.extraction.allocator import keep_freed_memory, release_freed_memory
kept = keep_freed_memory()
assert keep_freed_memory() == kept  # once per process
faults = []
for _ in range(4):  # 40 MiB: above glibc's own highest mmap threshold (32 MiB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(40 << 18)
    del block
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
release_freed_memory()
print(json.dumps({"kept": kept, "faults": faults}))
"""


def _probe(**env: str) -> dict:
    import os

    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=app_dir(),
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_freed_memory_is_reused_without_page_faults():
    kept = _probe()
    assert kept["kept"] is True
    assert kept["faults"][0] > 200  # the first allocation faults its pages in
    assert max(kept["faults"][1:]) < 20, kept  # the next ones reuse them
    off = _probe(ISOSCOPE_KEEP_FREED_MEMORY="0")
    assert off["kept"] is False
    assert min(off["faults"]) > 200, off  # glibc's default: mapped and faulted in every time
