"""The allocator's handling of freed memory (glibc), decided per model: a small model's
extraction reuses freed blocks without faulting them in again, a big model's hands them back
(each allocation faulted in afresh), the last extraction to start decides, and the environment
turns keeping off. Each case runs in a fresh interpreter, since the setting is process-wide."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from isoscope.engine.environment import app_dir

PROBE = """
import json, resource, sys, numpy as np
from isoscope.engine.allocator import for_extraction, release_freed_memory
def faults():
    out = []
    for _ in range(4):  # 40 MiB: above glibc's own highest mmap threshold (32 MiB)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = np.ones(40 << 17)
        del block
        out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return out
result = []
for size in json.loads(sys.argv[1]):
    kept = for_extraction(size)
    result.append({"kept": kept, "again": for_extraction(size) == kept, "faults": faults()})
    release_freed_memory()
print(json.dumps(result))
"""

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)


def _probe(sizes: list[int], **env: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(sizes)],
        cwd=app_dir(),
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _reused(run: dict) -> bool:
    return run["faults"][0] > 200 and max(run["faults"][1:]) < 20


def _faulted_each_time(run: dict) -> bool:
    return min(run["faults"]) > 200


@glibc_only
def test_a_small_model_reuses_freed_memory_and_a_big_one_gives_it_back():
    from isoscope.engine.allocator import BIG_WEIGHTS_BYTES

    small, big = 100 << 20, BIG_WEIGHTS_BYTES
    runs = _probe([small, big, small])
    assert [r["kept"] for r in runs] == [True, False, True]
    assert all(r["again"] for r in runs)  # set once, stable
    assert _reused(runs[0]), runs[0]
    assert _faulted_each_time(runs[1]), runs[1]  # 4 MiB threshold: mapped and returned
    assert _reused(runs[2]), runs[2]  # the last extraction to start decides


@glibc_only
def test_keeping_is_off_by_the_environment():
    (run,) = _probe([100 << 20], ISOSCOPE_KEEP_FREED_MEMORY="0")
    assert run["kept"] is False
    assert _faulted_each_time(run), run  # glibc's default: above 32 MiB, mapped every time


def test_elsewhere_nothing_is_kept():
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        pytest.skip("glibc: covered above")
    (run,) = _probe([100 << 20])
    assert run["kept"] is False
