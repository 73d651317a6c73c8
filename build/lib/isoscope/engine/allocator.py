"""How the C allocator treats memory freed by CPU forward passes (Linux with glibc), decided per
model: kept for reuse (speed) or handed back to the system (memory). Elsewhere (macOS, Windows,
musl) every function here is a no-op.

A forward pass allocates and frees its intermediate tensors and hidden states, hundreds of
megabytes per batch. glibc's malloc hands large freed blocks back to the kernel (``munmap``, or a
trim of the heap's top), so the next batch faults the same amount in again, page by page, each
page zeroed by the kernel: hundreds of thousands of page faults per extraction. What that costs
depends on the machine and on what else the process holds: beside a large resident token sample
the forward passes slow down. Kept by the allocator, the memory is reused and the forward passes
fault nothing (the figures are in docs/performance.md).

- :func:`keep_freed_memory`, at the start of a CPU extraction of a model under
  :data:`BIG_WEIGHTS_BYTES`: blocks up to :data:`KEEP_BYTES` come from the heap and the heap's top
  is trimmed only above that; :func:`release_freed_memory` (``malloc_trim``) at its end, so an
  idle process does not keep a batch's peak.
- :func:`give_back_large_frees`, for a model of :data:`BIG_WEIGHTS_BYTES` and more (at its load
  and at each of its extractions), where memory is what limits: blocks of
  :data:`MMAP_THRESHOLD_BYTES` and more get their own mappings, which go back when freed.

The setting is process-wide: the model of the extraction that starts last decides. Setting
either threshold turns off glibc's own adjustment of the mmap threshold, so both are always set.
``ISOSCOPE_KEEP_FREED_MEMORY=0`` leaves glibc's defaults for small models.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

# glibc's mallopt parameters (malloc.h) and its default trim threshold.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_DEFAULT_TRIM_BYTES = 128 << 10

BIG_WEIGHTS_BYTES = 1 << 30  # models whose weights take this much on the CPU give memory back
MMAP_THRESHOLD_BYTES = 4 << 20  # and their allocations this large get their own mapping

# Freed memory kept for reuse (smaller models): the heap's top is trimmed only above this, and
# blocks below it come from the heap. Where glibc refuses a threshold this high, its highest
# (32 MiB on 64-bit systems, half its heap size).
KEEP_BYTES = 1 << 30
_MMAP_THRESHOLD_MAX = 32 << 20

_lock = threading.Lock()
_mode: dict[str, str | None] = {"now": None}  # "keep", "give back" or None (glibc's defaults)


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


def _set(mode: str, mmap_bytes: tuple[int, ...], trim_bytes: int) -> bool:
    with _lock:
        if _mode["now"] == mode:
            return True
        libc = _libc()
        if libc is None:
            return False
        mapped = any(libc.mallopt(_M_MMAP_THRESHOLD, size) for size in mmap_bytes)
        if not (mapped and libc.mallopt(_M_TRIM_THRESHOLD, trim_bytes)):
            return False
        _mode["now"] = mode
        return True


def keep_freed_memory() -> bool:
    """Keep freed blocks for reuse (see the module doc); True where it is in effect."""
    if os.environ.get("ISOSCOPE_KEEP_FREED_MEMORY", "1").lower() in ("0", "false", "no"):
        return False
    return _set("keep", (KEEP_BYTES, _MMAP_THRESHOLD_MAX), KEEP_BYTES)


def give_back_large_frees() -> bool:
    """Have glibc serve allocations of :data:`MMAP_THRESHOLD_BYTES` and more from their own
    mappings, which go back to the system when freed; True where it is in effect.

    glibc's default threshold rises with every such free, up to 32 MiB; after it, a big model's
    per-layer activations (tens to hundreds of megabytes per tensor for a 1.5B decoder) come from
    the heap, which keeps them once freed, and the process's peak grows by gigabytes. Mappings of
    their own cost some speed (each is faulted in afresh), so only models of
    :data:`BIG_WEIGHTS_BYTES` and more get it on the CPU, where the memory is what limits
    (docs/performance.md, "A 1.5B decoder on the CPU")."""
    return _set("give back", (MMAP_THRESHOLD_BYTES,), _DEFAULT_TRIM_BYTES)


def for_extraction(weight_bytes: int) -> bool:
    """The setting for a CPU extraction of a model whose weights take ``weight_bytes``: True
    where the allocator now keeps freed memory."""
    if weight_bytes >= BIG_WEIGHTS_BYTES:
        give_back_large_frees()
        return False
    return keep_freed_memory()


def release_freed_memory() -> None:
    """Hand the memory the allocator keeps back to the kernel (where it keeps freed memory)."""
    if _mode["now"] == "keep":
        libc = _libc()
        if libc is not None:
            libc.malloc_trim(0)
