"""A bf16 checkpoint loaded as float32 through isoscope's loader (files read with pread, not mmap:
backend.engine.widening) is the plain ``from_pretrained(dtype=float32)`` to the bit: every
parameter, every buffer (non-persistent ones made at init included: rotary ``inv_freq``,
sinusoidal tables) and the hidden states, over representative families of the zoo."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

import backend.engine.checkpoints as checkpoints
from backend.engine.models import load_model
from tests import media_models, zoo

pytestmark = pytest.mark.integration

# every zoo family (learned, rotary, relative and sinusoidal positions; MoE; whisper's audio
# encoder), an image model, and a Gemma whose non-persistent embed_scale (sqrt(72), made at init)
# a bf16 load would round: loading as stored and widening after would not reproduce it
FAMILIES = (*zoo.FAMILIES, "vit", "gemma-72")


def _save_gemma_72(folder):
    from transformers import AutoModel

    config = zoo.config_of("gemma")
    config.hidden_size = 72
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    zoo.tokenizer().save_pretrained(folder)


def _save_bf16(family: str, folder):
    """The family's tiny checkpoint with every floating tensor stored as bf16."""
    if family == "vit":
        media_models.save_image_model("vit", folder)
    elif family == "gemma-72":
        _save_gemma_72(folder)
    else:
        zoo.build(family, folder)
    for path in folder.glob("*.safetensors"):
        tensors = load_file(path)
        half = {k: t.to(torch.bfloat16) if t.is_floating_point() else t for k, t in tensors.items()}
        save_file(half, path, metadata={"format": "pt"})
    return folder


def _inputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    config = model.config
    gen = torch.Generator().manual_seed(0)
    if getattr(config, "num_mel_bins", None):  # whisper: the encoder's full window of features
        frames = 2 * config.max_source_positions
        return {"input_features": torch.randn(1, config.num_mel_bins, frames, generator=gen)}
    if getattr(config, "image_size", None):
        size = config.image_size
        return {"pixel_values": torch.randn(1, config.num_channels, size, size, generator=gen)}
    return {"input_ids": torch.randint(5, config.vocab_size, (2, 12), generator=gen)}


def _plain_float32(folder) -> torch.nn.Module:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    is_encoder_decoder = getattr(model.config, "is_encoder_decoder", False)
    return model.get_encoder() if is_encoder_decoder else model


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bf16_checkpoint_widened_equals_the_plain_float32_load(family, tmp_path, monkeypatch):
    folder = _save_bf16(family, tmp_path / family)
    widened = []
    real = checkpoints.pread_reads
    monkeypatch.setattr(checkpoints, "pread_reads", lambda: widened.append(1) or real())
    loaded = load_model(str(folder), device="cpu", dtype="float32")
    assert widened == [1]  # the load took the pread path
    plain = _plain_float32(folder)
    ours = loaded.model
    for what in ("named_parameters", "named_buffers"):  # buffers: persistent or not
        theirs = dict(getattr(plain, what)())
        mine = dict(getattr(ours, what)())
        assert mine.keys() == theirs.keys()
        for name, tensor in mine.items():
            assert tensor.dtype == theirs[name].dtype, name
            assert torch.equal(tensor, theirs[name]), name
    inputs = _inputs(plain)
    with torch.inference_mode():
        a = plain(**inputs, output_hidden_states=True).hidden_states
        b = ours(**inputs, output_hidden_states=True).hidden_states
    assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_float32_checkpoint_keeps_its_mmap(tiny_bert_dir, monkeypatch):
    widened = []
    real = checkpoints.pread_reads
    monkeypatch.setattr(checkpoints, "pread_reads", lambda: widened.append(1) or real())
    load_model(str(tiny_bert_dir), device="cpu", dtype="float32")
    assert widened == []
