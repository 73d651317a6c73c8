"""A bf16/fp16 checkpoint read into float32 without the file and the copy in memory at once
(issue #32: peak RSS about the widened weights, not the file plus them).

transformers memory-maps each safetensors file for the whole load and converts every tensor from
the mapping; the file's pages it touches count in the process's RSS until the load ends, so the
peak is the file (the half-precision weights) plus the float32 copy: 3.37 GB for a 0.5B bf16
checkpoint whose float32 weights take 2.4. safetensors has a second backend,
``safe_open(..., backend="pread")``, which reads each tensor into its own buffer that dies once the
tensor is converted; transformers already takes it on Windows and MPS, but offers no switch for it.
:func:`pread_reads` flips that one call for the current thread. Everything else in the load is
transformers' own float32 path, so the model is the plain float32 load to the bit, non-persistent
buffers (rotary ``inv_freq``, sinusoidal tables) included, and nothing stays mapped to fault in on
the first forward pass.

Only a load that widens needs it (:func:`widens`): a float32 checkpoint loaded as float32 stays
zero-copy mmapped, a bf16 one loaded as bf16 too, and a GPU or ``device_map`` load is untouched.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

HALF = ("BF16", "F16")  # safetensors' names of the 2-byte float dtypes
_pread = threading.local()  # whether this thread's loads read with pread (other threads: mmap)
_install_lock = threading.Lock()


def widens(census: dict[str, int], dtype: torch.dtype, device_map: str | None) -> bool:
    """Whether a load of a checkpoint with ``census`` (parameters per safetensors dtype,
    :func:`backend.engine.preflight.folder_census`) into ``dtype`` on the CPU (no ``device_map``)
    makes a wider copy of every floating tensor it reads: all of them are BF16/F16 and ``dtype``
    is wider."""
    floating = [d for d in census if d.startswith(("F", "BF"))]  # not I64, U8, BOOL
    return (
        device_map is None
        and bool(floating)
        and all(d in HALF for d in floating)
        and dtype.is_floating_point
        and dtype.itemsize > 2
    )


@contextlib.contextmanager
def pread_reads() -> Iterator[bool]:
    """Within the block, ``from_pretrained`` in this thread opens safetensors files with the pread
    backend. Yields False (and changes nothing) when this transformers does not open them through
    ``transformers.modeling_utils.safe_open``: the load is then the plain mmapped one."""
    if not _install():
        yield False
        return
    before = getattr(_pread, "on", False)
    _pread.on = True
    try:
        yield True
    finally:
        _pread.on = before


def _install() -> bool:
    """Wrap transformers' ``safe_open`` once (idempotent, thread-safe): the wrapper takes the pread
    backend when the calling thread is inside :func:`pread_reads` and is the original otherwise,
    so a concurrent load in another thread keeps its mmap."""
    import transformers.modeling_utils as modeling_utils

    with _install_lock:
        original = getattr(modeling_utils, "safe_open", None)
        if original is None:
            return False
        if getattr(original, "isoscope_pread", False):
            return True

        def safe_open(filename, framework, device="cpu", backend="mmap", **kwargs):
            if getattr(_pread, "on", False):
                backend = "pread"
            return original(filename, framework, device=device, backend=backend, **kwargs)

        safe_open.isoscope_pread = True  # type: ignore[attr-defined]
        modeling_utils.safe_open = safe_open
        return True
