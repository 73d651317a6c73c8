"""The memory preflight: parameters by dtype from safetensors headers, the bytes in the chosen
dtype against the free memory, and a refusal with the numbers and the ways out."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.preflight import GIB, Preflight, folder_census, free_memory, preflight

pytestmark = pytest.mark.unit


def test_the_census_reads_headers_only(tmp_path):
    save_file(
        {"a": torch.zeros(3, 4, dtype=torch.bfloat16), "b": torch.zeros(5)},
        tmp_path / "x.safetensors",
    )
    save_file({"c": torch.zeros(2, 2, dtype=torch.bfloat16)}, tmp_path / "y.safetensors")
    assert folder_census(tmp_path) == {"BF16": 16, "F32": 5}
    assert folder_census(tmp_path, [tmp_path / "y.safetensors"]) == {"BF16": 4}


def test_a_model_that_does_not_fit_is_refused_with_numbers_and_ways_out():
    plan = Preflight({"BF16": 7_000_000_000}, "float32", "cuda", free_bytes=16 * GIB)
    assert not plan.fits and plan.needed_bytes == int(7e9 * 4 * 1.1)
    with pytest.raises(ModelLoadError) as refused:
        plan.check("org/seven-b")
    text = str(refused.value)
    assert "7,000.0 M parameters (stored 7,000.0 M BF16)" in text and "16.0 GiB free" in text
    assert "--dtype bfloat16 (about 14.3 GiB" in text and "--device-map auto" in text
    Preflight({"BF16": 7_000_000_000}, "bfloat16", "cuda", free_bytes=16 * GIB).check("x")
    on_cpu = Preflight({"BF16": 7_000_000_000}, "float32", "cpu", free_bytes=16 * GIB)
    with pytest.raises(ModelLoadError, match=r"use a GPU \(--device cuda, with --dtype bfloat16"):
        on_cpu.check("org/seven-b")


def test_unknown_free_memory_never_refuses():
    assert Preflight({"F32": 10**12}, "float32", "cpu", free_bytes=None).fits


def test_free_memory_is_read_from_the_system():
    free = free_memory("cpu")
    assert free is None or free > 0
    assert preflight({"F32": 1}, "float32", "cpu").fits


def test_the_gguf_census_reads_the_tensor_table(tmp_path):
    """The same counts per stored type as the ``gguf`` package's full reader; {} for a file that
    is not a GGUF (the conversion then says why)."""
    from gguf import GGUFReader
    from transformers import GPT2Config, GPT2LMHeadModel

    from isoscope.engine.load.preflight import gguf_census
    from tests.gguf_files import gpt2_vocabulary, write_gguf

    vocab = gpt2_vocabulary()
    config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(vocab["tokens"]))
    path = write_gguf(GPT2LMHeadModel(config), tmp_path / "tiny.gguf", "gpt2", vocab)
    full: dict[str, int] = {}
    for tensor in GGUFReader(str(path)).tensors:
        kind = tensor.tensor_type.name
        full[kind] = full.get(kind, 0) + int(tensor.n_elements)
    assert gguf_census(path) == full and sum(full.values()) > 0
    (tmp_path / "not.gguf").write_bytes(b"not a gguf file at all")
    assert gguf_census(tmp_path / "not.gguf") == {}
