"""One function for the device and one for the dtype."""

from __future__ import annotations

import pytest
import torch

from isoscope.engine.device import describe_device, resolve_device, resolve_dtype
from isoscope.engine.errors import InputError


def test_auto_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_unavailable_or_unknown_device_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(InputError, match="no CUDA"):
        resolve_device("cuda")
    with pytest.raises(InputError, match="MPS"):
        resolve_device("mps")
    with pytest.raises(InputError, match="unknown device"):
        resolve_device("tpu")
    assert resolve_device("CPU") == torch.device("cpu")


def test_dtype_rules():
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert resolve_dtype(cpu) == torch.float32
    assert resolve_dtype(gpu, "bfloat16") == torch.bfloat16
    for half in ("float16", "fp16", "half"):
        with pytest.raises(InputError, match="float16"):
            resolve_dtype(gpu, half)
    with pytest.raises(InputError, match="only offered on a GPU"):
        resolve_dtype(cpu, "bfloat16")
    with pytest.raises(InputError, match="unknown dtype"):
        resolve_dtype(cpu, "int8")
    assert describe_device(cpu, torch.float32) == "cpu · float32"
