"""Will the model fit? Decided before anything is downloaded or loaded.

The parameter count and dtypes come from the safetensors headers (the 8-byte length and the JSON
header of each file, never the tensors): range requests for a remote repo (as huggingface_hub's
``get_safetensors_metadata`` reads them; :func:`isoscope.engine.load.hub.fetch`), the files for a
local folder, and the tensor table of a GGUF file. The memory a load needs is the parameters times the size of the
chosen dtype (transformers loads straight into it), set against the free RAM (CPU) or the free
VRAM (CUDA); with ``device_map="auto"`` the two add up. When it does not fit, the refusal gives
the numbers and the ways out.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from isoscope.engine.errors import ModelLoadError

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
HEADROOM = 1.1  # activations of one batch, the statistics and the interpreter, above the weights


@dataclass(frozen=True)
class Preflight:
    """Parameters by stored dtype, the bytes they take in ``dtype`` and the memory free."""

    parameters_by_dtype: dict[str, int]
    dtype: str
    device: str
    free_bytes: int | None

    @property
    def parameters(self) -> int:
        return sum(self.parameters_by_dtype.values())

    @property
    def needed_bytes(self) -> int:
        return int(self.parameters * DTYPE_BYTES.get(self.dtype, 4) * HEADROOM)

    @property
    def fits(self) -> bool:
        return self.free_bytes is None or self.needed_bytes <= self.free_bytes

    def describe(self) -> str:
        stored = ", ".join(f"{n / 1e6:,.1f} M {d}" for d, n in self.parameters_by_dtype.items())
        free = "unknown" if self.free_bytes is None else f"{self.free_bytes / GIB:.1f} GiB"
        return (
            f"{self.parameters / 1e6:,.1f} M parameters (stored {stored}) need about "
            f"{self.needed_bytes / GIB:.1f} GiB as {self.dtype} on {self.device}; {free} free"
        )

    def check(self, source: str) -> None:
        """:class:`ModelLoadError` with the numbers and the ways out when it does not fit."""
        if self.fits:
            return
        ways = []
        half = int(self.parameters * 2 * HEADROOM)
        wide = DTYPE_BYTES.get(self.dtype, 4) > 2
        if self.device == "cpu":  # isoscope offers bfloat16 on a GPU only
            ways.append(
                "a GPU (--device cuda"
                + (f", with --dtype bfloat16 about {half / GIB:.1f} GiB" if wide else "")
                + ")"
            )
        else:
            if wide:
                ways.append(f"--dtype bfloat16 (about {half / GIB:.1f} GiB; UI: Dtype)")
            if self.device != "auto-map":
                ways.append("--device-map auto (GPUs, then CPU RAM)")
        ways.append("a smaller model")
        raise ModelLoadError(
            f"{source!r} does not fit: {self.describe()}. Nothing was downloaded or loaded; "
            f"use {', or '.join(ways)}"
        )


def stored_bytes_per_parameter(folder: Path) -> int:
    """Bytes per parameter of a checkpoint as its ``config.json`` says it is stored (4 when it
    does not say: the larger)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return 4
    dtype = (config.get("dtype") or config.get("torch_dtype")) if isinstance(config, dict) else None
    return DTYPE_BYTES.get(str(dtype), 4)


def safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file (its first 8 + n bytes only)."""
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        if length > 100 * 1024 * 1024:
            raise ModelLoadError(f"{path.name} is not a safetensors file (header of {length} B)")
        return json.loads(fh.read(length))


def census_of_headers(headers: Iterable[dict]) -> dict[str, int]:
    """Parameters per dtype over safetensors headers (``__metadata__`` left out)."""
    counts: dict[str, int] = {}
    for header in headers:
        for name, tensor in header.items():
            if name == "__metadata__":
                continue
            n = 1
            for dim in tensor["shape"]:
                n *= int(dim)
            counts[tensor["dtype"]] = counts.get(tensor["dtype"], 0) + n
    return counts


def folder_census(folder: Path, files: Iterable[Path] | None = None) -> dict[str, int]:
    """Parameters per dtype of a checkpoint folder's safetensors files (or of ``files``); {}
    when there are none."""
    paths = sorted(folder.glob("*.safetensors")) if files is None else list(files)
    return census_of_headers(safetensors_header(p) for p in paths)


def gguf_census(path: Path) -> dict[str, int]:
    """Parameters per stored type (``Q4_1``, ``F32``...) of a GGUF file's tensor table; {} when
    the file cannot be read (the conversion then says why). transformers' reader walks the
    metadata without building it, where the ``gguf`` package's ``GGUFReader`` parses the whole
    vocabulary first, orders of magnitude slower; the data is never read."""
    from gguf import GGMLQuantizationType
    from transformers.integrations.gguf.reader import GgufHeader

    try:
        tensors = GgufHeader.from_file(str(path)).tensors
    except (OSError, ValueError, KeyError, struct.error):
        return {}
    counts: dict[str, int] = {}
    for tensor in tensors:
        kind = GGMLQuantizationType(tensor.ggml_type).name
        counts[kind] = counts.get(kind, 0) + math.prod(tensor.shape)
    return counts


def free_memory(device: str) -> int | None:
    """Free bytes where the weights go: VRAM on ``cuda``, available RAM on the CPU (None when
    the system does not say)."""
    if device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[0])
        return None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def preflight(counts: dict[str, int], dtype: str, device: str) -> Preflight:
    """The :class:`Preflight` of ``counts`` loaded as ``dtype`` on ``device`` (``auto-map``:
    device_map="auto", RAM and VRAM together)."""
    if device == "auto-map":
        free = [f for f in (free_memory("cpu"), free_memory("cuda")) if f is not None]
        return Preflight(counts, dtype, device, sum(free) if free else None)
    return Preflight(counts, dtype, device, free_memory(device))


def once(
    on_preflight: Callable[[int, Path], None] | None,
) -> Callable[[dict[str, int], Path], None]:
    """``announce(census, folder)``: calls ``on_preflight(parameters, folder)`` the first time it
    gets a census (a Hub download announces before its weights, a local folder after reading
    its headers: whichever comes first); later calls, an empty census or no callback do nothing."""
    done = False

    def announce(census: dict[str, int], folder: Path) -> None:
        nonlocal done
        if on_preflight is None or done or not census:
            return
        done = True
        on_preflight(sum(census.values()), folder)

    return announce
