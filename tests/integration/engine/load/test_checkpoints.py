"""Checkpoint folders (isoscope.engine.load.checkpoints): read straight into the requested dtype, and a
fingerprint that follows the weights."""

from __future__ import annotations

import shutil

import pytest
import torch

from isoscope.engine.load.checkpoints import fingerprint_folder, opened_path, read_folder


class _Float32Spy:
    """Records every float32 tensor of at least ``numel`` elements that an aten op makes."""

    def __init__(self, numel: int) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        spy = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in out if isinstance(out, tuple | list) else [out]:
                    if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                        if t.numel() >= numel:
                            spy.made.append((str(func), tuple(t.shape)))
                return out

        self.made: list[tuple[str, tuple]] = []
        self.mode = Mode()


@pytest.mark.parametrize("requested", [torch.bfloat16, torch.float32])
def test_a_bf16_checkpoint_loads_into_the_requested_dtype(tmp_path, requested):
    """bf16 safetensors requested as bf16 load as bf16 with no float32 copy of any weight on the
    way (float32, the positive control, does make them)."""
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=500, n_positions=64)
    GPT2Model(config).to(torch.bfloat16).save_pretrained(tmp_path)
    spy = _Float32Spy(numel=32 * 32)  # the smallest weight matrix
    with spy.mode:
        loaded = read_folder(
            tmp_path, "bf16", "bf16", allow_pickle=False, head="base", dtype=requested
        )
    assert {p.dtype for p in loaded.model.parameters()} == {requested}
    if requested == torch.bfloat16:
        assert spy.made == []
    else:
        assert spy.made  # the spy sees float32 weights when they are made


def test_the_fingerprint_follows_the_weights_not_the_folder(tiny_bert_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, copy)
    assert fingerprint_folder(copy) == fingerprint_folder(tiny_bert_dir)
    parts = read_folder(copy, "copy", "copy", allow_pickle=False, head="base")
    assert parts.fingerprint == fingerprint_folder(copy) + "-base" and not parts.random
    assert parts.weights_dir == copy and parts.tokenizer is not None
    with (copy / "model.safetensors").open("r+b") as fh:
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    assert fingerprint_folder(copy) != fingerprint_folder(tiny_bert_dir)
    assert opened_path(str(copy)) == str(copy.resolve()) and opened_path("default") is None
