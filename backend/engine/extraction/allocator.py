"""The C allocator's handling of freed memory during CPU forward passes (Linux with glibc).

A forward pass allocates and frees its intermediate tensors and hidden states, hundreds of
megabytes per batch. glibc's malloc hands large freed blocks back to the kernel (``munmap``, or a
trim of the heap's top), so the next batch faults the same amount in again, page by page, each
page zeroed by the kernel: SmolLM2-135M on 400 texts took 300,000-800,000 page faults per
extraction on a 2-vCPU Xeon VM. How much that costs depends on the machine and on what else the
process holds: with the token sample's 571 MB resident, the same forward passes ran 5-15% slower
(0.5-1.5 s of 10.5 s), and a plain loop beside a buffer of that size slowed alike. Kept by the
allocator instead, the memory is reused and the forward passes fault nothing: 10.0 s with or
without the sample (docs/performance.md).

:func:`keep_freed_memory` tells glibc, once per process, to keep freed blocks up to
:data:`KEEP_BYTES` (``mallopt``: the mmap threshold and the trim threshold); :func:`release_freed_memory`
returns what the allocator holds to the kernel (``malloc_trim``), which an extraction does when
it ends, so an idle process does not keep a batch's peak. Elsewhere (macOS, Windows, musl) both
are no-ops. ``ISOSCOPE_KEEP_FREED_MEMORY=0`` turns this off.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Freed memory kept for reuse: the top of the heap is trimmed only above this, and blocks below
# it come from the heap, not from their own mapping. glibc caps the mmap threshold at 32 MiB on
# 64-bit systems (half its heap size), so a larger block still gets its own mapping.
KEEP_BYTES = 1 << 30
_MMAP_THRESHOLD_MAX = 32 << 20

_lock = threading.Lock()
_state: dict[str, object] = {"kept": None}


def _libc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def enabled() -> bool:
    return os.environ.get("ISOSCOPE_KEEP_FREED_MEMORY", "1").lower() not in ("0", "false", "no")


def keep_freed_memory() -> bool:
    """Keep freed blocks for reuse from now on (once per process); True where it is in effect.

    Both thresholds are set together: setting either one turns off glibc's own adjustment of
    the mmap threshold, which would otherwise stay at 128 KiB and map every tensor afresh.
    """
    with _lock:
        if _state["kept"] is None:
            libc = _libc() if enabled() else None
            kept = False
            if libc is not None:
                mapped = libc.mallopt(_M_MMAP_THRESHOLD, KEEP_BYTES) or libc.mallopt(
                    _M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX
                )
                kept = bool(mapped) and bool(libc.mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES))
            _state["kept"] = kept
        return bool(_state["kept"])


def release_freed_memory() -> None:
    """Hand the memory the allocator keeps back to the kernel (where :func:`keep_freed_memory`
    is in effect)."""
    if _state["kept"]:
        libc = _libc()
        if libc is not None:
            libc.malloc_trim(0)
