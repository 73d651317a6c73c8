"""Which loads widen (bf16/fp16 checkpoint -> float32 on the CPU), and that inside
:func:`pread_reads` transformers' safe_open reads without mapping the file, in this thread only."""

from __future__ import annotations

import sys
import threading

import pytest
import torch
from safetensors.torch import save_file

from isoscope.engine.load.widening import made_in_half, pread_reads, widen_in_place, widens

pytestmark = pytest.mark.unit
WEIGHTS = torch.arange(4096.0) % 256


@pytest.mark.parametrize(
    ("census", "dtype", "device_map", "expected"),
    [
        ({"BF16": 10}, torch.float32, None, True),
        ({"F16": 10, "I64": 3}, torch.float32, None, True),  # integer buffers are not widened
        ({"BF16": 10, "F16": 2}, torch.float32, None, True),
        ({"BF16": 10, "F32": 2}, torch.float32, None, False),  # fp32 tensors stay zero-copy
        ({"F32": 10}, torch.float32, None, False),
        ({"BF16": 10}, torch.bfloat16, None, False),  # loaded as stored: zero-copy mmap
        ({"BF16": 10}, torch.float16, None, False),
        ({"BF16": 10}, torch.float32, "cuda:0", False),  # straight onto a GPU
        ({"BF16": 10}, torch.float32, "auto", False),
        ({"F8_E4M3": 10}, torch.float32, None, False),
        ({}, torch.float32, None, False),  # pickle weights: no census
    ],
)
def test_only_a_half_checkpoint_widened_on_the_cpu_widens(census, dtype, device_map, expected):
    assert widens(census, dtype, device_map) is expected


def _checkpoint(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"w": WEIGHTS.to(torch.bfloat16)}, path)  # exact in bf16
    return path


def _opened_mapped(path) -> bool:
    """Whether transformers' safe_open, as from_pretrained calls it, maps ``path``."""
    import transformers.modeling_utils as modeling_utils

    with modeling_utils.safe_open(str(path), framework="pt", device="cpu") as handle:
        assert torch.equal(handle.get_slice("w")[:].float(), WEIGHTS)
        with open("/proc/self/maps") as maps:
            return any(line.rstrip().endswith(str(path)) for line in maps)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps")


@linux_only
def test_inside_the_block_transformers_reads_the_file_without_mapping_it(tmp_path):
    path = _checkpoint(tmp_path)
    assert _opened_mapped(path)  # the positive control: transformers' default maps it
    in_other_thread = []
    with pread_reads() as taken:
        assert taken
        assert not _opened_mapped(path)
        worker = threading.Thread(target=lambda: in_other_thread.append(_opened_mapped(path)))
        worker.start()
        worker.join()
    assert in_other_thread == [True]  # another thread's load keeps its mmap
    assert _opened_mapped(path)  # and so does this thread's after the block


@linux_only
def test_a_nested_block_restores_the_outer_one_even_after_an_error(tmp_path):
    import transformers.modeling_utils as modeling_utils

    path = _checkpoint(tmp_path)
    with pread_reads():
        wrapper = modeling_utils.safe_open
        with pytest.raises(RuntimeError), pread_reads():
            raise RuntimeError("the load failed")
        assert not _opened_mapped(path)
        assert modeling_utils.safe_open is wrapper  # installed once, not a wrapper of a wrapper
    assert _opened_mapped(path)


class _Tied(torch.nn.Module):
    """Two embeddings sharing one weight, a persistent and a non-persistent buffer."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.a = torch.nn.Embedding(8, 4, dtype=dtype)
        self.b = torch.nn.Linear(4, 8, bias=False, dtype=dtype)
        self.b.weight = self.a.weight
        self.register_buffer("table", torch.linspace(0, 1, 5, dtype=dtype))
        self.register_buffer("scale", torch.tensor(72**0.5, dtype=dtype), persistent=False)


def test_made_in_half_names_what_init_made_in_half_only():
    model = _Tied(torch.bfloat16)
    assert made_in_half(model, torch.float32) == ["scale"]  # the table comes from the checkpoint
    model.cached = torch.ones(2, dtype=torch.bfloat16)  # a plain tensor attribute made at init
    assert made_in_half(model, torch.float32) == ["scale", "cached"]
    assert made_in_half(_Tied(torch.float32), torch.float32) == []


def test_widening_in_place_keeps_ties_and_values_and_refuses_what_it_cannot_reproduce():
    model = _Tied(torch.bfloat16)
    model.scale = model.scale.float()  # as rotary inv_freq: made in float32 under a half load
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert widen_in_place(model, torch.float32, {"missing_keys": []})
    assert model.b.weight is model.a.weight and model.a.weight.dtype == torch.float32
    for name, tensor in model.state_dict().items():
        assert tensor.dtype == torch.float32 and torch.equal(tensor, before[name].float())
    refused = _Tied(torch.bfloat16)
    assert not widen_in_place(refused, torch.float32, {})  # its scale is bf16
    assert not widen_in_place(_Tied(torch.float32), torch.float32, {"missing_keys": ["a.weight"]})
    assert refused.a.weight.dtype == torch.bfloat16  # a refusal changes nothing
