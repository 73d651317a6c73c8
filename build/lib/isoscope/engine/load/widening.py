"""A bf16/fp16 checkpoint read into float32 without the file and the copy in memory at once
(peak RSS about the widened weights, not the file plus them).

transformers memory-maps each safetensors file for the whole load and converts every tensor from
the mapping; the file's pages it touches count in the process's RSS until the load ends, so the
peak is the file (the half-precision weights) plus the float32 copy, about 1.5 times the float32
weights. :func:`load_widened` avoids that two ways, each peaking at about the float32 weights
(benchmarks/widen_rss.py measures them; docs/performance.md):

- released (Linux, one stored dtype): load in the stored dtype, which transformers keeps as
  zero-copy views of the mapping, then widen tensor by tensor, handing each source's pages back
  (``madvise(MADV_DONTNEED)``; pages of a file mapping nothing wrote to are re-read from the file
  if touched again, so this cannot lose data). The fastest load, but only right when the half
  load differs from the float32 one in nothing but the weights' dtype: :func:`widen_in_place`
  refuses (and widens nothing) when the model made a tensor at init in half precision (Gemma's
  ``embed_scale`` buffer: sqrt(hidden) rounded to bf16) or drew weights the checkpoint lacks.
- pread (otherwise): transformers' own float32 load, with the files read by safetensors' pread
  backend (which transformers takes on Windows and MPS) instead of mmap: each tensor's bytes go
  to a buffer that dies once it is converted. The plain float32 load to the bit, at more CPU
  time (a fresh buffer per tensor).

Both leave nothing mapped to fault in on the first forward pass. A float32 checkpoint loaded as
float32 stays zero-copy mmapped, a bf16 one loaded as bf16 too, and a GPU or ``device_map`` load
is untouched (:func:`widens`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch

HALF = {"BF16": torch.bfloat16, "F16": torch.float16}  # safetensors' 2-byte float dtypes
RELEASES = sys.platform.startswith("linux")  # /proc/self/smaps and madvise
_pread = threading.local()  # whether this thread's loads read with pread (other threads: mmap)
_install_lock = threading.Lock()


def widens(census: dict[str, int], dtype: torch.dtype, device_map: str | None) -> bool:
    """Whether a load of a checkpoint with ``census`` (parameters per safetensors dtype,
    :func:`isoscope.engine.load.preflight.folder_census`) into ``dtype`` on the CPU (no ``device_map``)
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


def load_widened(
    load: Callable[..., Any], census: dict[str, int], dtype: torch.dtype
) -> tuple[torch.nn.Module, Any]:
    """``(model, loading info)`` as ``load(dtype)`` makes them (``load``: ``from_pretrained`` of a
    checkpoint on the CPU with ``output_loading_info=True``), for a checkpoint that
    :func:`widens`, without holding the file and the widened copy at once (module docstring)."""
    stored = [HALF[d] for d in census if d in HALF]
    if RELEASES and len(stored) == 1:
        with torch.random.fork_rng(devices=[]):  # a refused try leaves the draws to the reload
            model, info = load(stored[0])
        if widen_in_place(model, dtype, info):
            return model, info
        del model, info  # zero-copy views of the mapping: dropping them costs nothing
    with pread_reads():
        return load(dtype)


def widen_in_place(model: torch.nn.Module, dtype: torch.dtype, info: dict) -> bool:
    """Widen a half-precision load's floating parameters and buffers to ``dtype`` one by one,
    releasing each source's pages of a clean checkpoint mapping; False, with nothing changed,
    when the result would not be the ``dtype`` load (``info``: from_pretrained's loading info)."""
    info = info.to_dict() if hasattr(info, "to_dict") else info
    if info.get("missing_keys") or info.get("mismatched_keys"):
        return False  # drawn at load time in half precision; a float32 load draws other values
    if made_in_half(model, dtype):
        return False
    clean = _clean_checkpoint_mappings()
    for param in model.parameters():  # a tied parameter is one object: widened once
        if param.is_floating_point() and param.dtype != dtype:
            source = param.data
            param.data = source.to(dtype)
            _release(source, clean)
    widened: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer.is_floating_point() and buffer.dtype != dtype:
                if id(buffer) not in widened:
                    widened[id(buffer)] = buffer.to(dtype)
                    _release(buffer, clean)
                setattr(module, name, widened[id(buffer)])
    for module in model.modules():  # as the dtype load writes it (T5's stacks hold copies)
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "dtype"):
            config.dtype = dtype
    return True


def made_in_half(model: torch.nn.Module, dtype: torch.dtype) -> list[str]:
    """Floating tensors of a half-precision load that the checkpoint did not hold and that are
    not ``dtype``: non-persistent buffers and plain tensor attributes made at init (Gemma's
    ``embed_scale``). Widening them would not give what a ``dtype`` load computes."""
    persistent = set(model.state_dict())
    found = [
        name
        for name, buffer in model.named_buffers()
        if name not in persistent and buffer.is_floating_point() and buffer.dtype != dtype
    ]
    for prefix, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                if value.dtype != dtype:
                    found.append(f"{prefix}.{attr}" if prefix else attr)
    return found


def _clean_checkpoint_mappings() -> list[tuple[int, int]]:
    """``(start, end)`` of this process's mappings of safetensors files that hold no written
    (copy-on-write, ``Anonymous``) page: their pages can be dropped and re-read from the file."""
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header: range perms ... path
                start, end = (int(x, 16) for x in fields[0].split("-"))
                current = (start, end) if fields[-1].endswith(".safetensors") else None
            elif current and fields[0] == "Anonymous:" and fields[1] == "0":
                ranges.append(current)
    return ranges


@functools.cache
def _madvise() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc.madvise


def _release(source: torch.Tensor, clean: list[tuple[int, int]]) -> None:
    """Drop the whole pages inside ``source``'s bytes when they lie in a clean mapping (the pages
    at either end may hold a neighbour, which refaults them from the file if it is read)."""
    start = source.data_ptr()
    end = start + source.numel() * source.element_size()
    if not source.is_contiguous() or not any(lo <= start and end <= hi for lo, hi in clean):
        return
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    last = end // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        _madvise()(first, last - first, mmap.MADV_DONTNEED)


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
        cast(Any, modeling_utils).safe_open = safe_open  # a function where it holds a class
        return True
