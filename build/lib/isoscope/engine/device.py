"""The one place that decides the device and dtype of a model.

Statistics are always computed in float64 on the CPU from the model's activations (float32, or
bfloat16 on a GPU when asked for). float16 is refused: outlier dimensions carry exactly the large
values that float16 clips (docs/methods.md section 0).
"""

from __future__ import annotations

import numpy as np
import torch

from isoscope.engine.errors import InputError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
DTYPE_CHOICES = ("float32", "bfloat16")


def resolve_device(requested: str = "auto") -> torch.device:
    """``auto`` picks CUDA, then Apple MPS, then CPU; an explicit choice must be available."""
    requested = (requested or "auto").lower()
    if requested not in DEVICE_CHOICES:
        raise InputError(f"unknown device {requested!r}; choose one of {', '.join(DEVICE_CHOICES)}")
    cuda_ok = torch.cuda.is_available()
    mps_ok = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if requested == "auto":
        if cuda_ok:
            return torch.device("cuda")
        if mps_ok:
            return torch.device("mps")
        return torch.device("cpu")
    if requested == "cuda" and not cuda_ok:
        raise InputError(
            "device 'cuda' was requested but no CUDA GPU is visible; use --device auto or cpu"
        )
    if requested == "mps" and not mps_ok:
        raise InputError(
            "device 'mps' was requested but Apple MPS is not available; use --device auto or cpu"
        )
    return torch.device(requested)


def resolve_dtype(device: torch.device, requested: str = "float32") -> torch.dtype:
    """float32 everywhere by default; bfloat16 only on a GPU and only on request; never float16."""
    requested = (requested or "float32").lower()
    if requested in ("float16", "fp16", "half"):
        raise InputError(
            "float16 is not offered: it clips the large values of outlier dimensions; "
            "use float32, or bfloat16 on a GPU"
        )
    if requested not in DTYPE_CHOICES:
        raise InputError(f"unknown dtype {requested!r}; choose one of {', '.join(DTYPE_CHOICES)}")
    if requested == "bfloat16":
        if device.type == "cpu":
            raise InputError("bfloat16 is only offered on a GPU; on the CPU use float32")
        return torch.bfloat16
    return torch.float32


def describe_device(device: torch.device, dtype: torch.dtype) -> str:
    """Short human label, e.g. ``cpu · float32`` or ``cuda (NVIDIA H200) · bfloat16``."""
    name = device.type
    if device.type == "cuda":
        name = f"cuda ({torch.cuda.get_device_name(device)})"
    return f"{name} · {str(dtype).removeprefix('torch.')}"


def to_numpy(tensor: torch.Tensor, dtype: torch.dtype | None = torch.float64) -> np.ndarray:
    """The one way a tensor becomes a numpy array: detach, move to the CPU, cast (default float64).

    Works for tensors on any device (CUDA, MPS, CPU) and in inference mode; bf16 is cast before
    the copy so numpy never sees a dtype it lacks. Pass ``dtype=None`` to keep the tensor's dtype.
    """
    tensor = tensor.detach()
    if dtype is not None and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return tensor.to("cpu").numpy()
