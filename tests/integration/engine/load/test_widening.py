"""A bf16 checkpoint loaded as float32 through isoscope's loader (files read with pread, not mmap:
isoscope.engine.load.widening) is the plain ``from_pretrained(dtype=float32)`` to the bit: every
parameter, every buffer (non-persistent ones made at init included: rotary ``inv_freq``,
sinusoidal tables) and the hidden states, over representative families of the zoo."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from isoscope.engine.load import widening
from isoscope.engine.load.models import load_model
from tests import media_models, zoo

pytestmark = pytest.mark.integration

# every zoo family (learned, rotary, relative and sinusoidal positions; MoE; whisper's audio
# encoder), an image model, and a Gemma whose non-persistent embed_scale (sqrt(72), made at init)
# a bf16 load would round: loading as stored and widening after would not reproduce it
FAMILIES = (*zoo.FAMILIES, "vit", "gemma-72", "bert-mlm")
# their half loads make embed_scale in bf16 (exact for sqrt(64), not for sqrt(72)), or draw the
# missing pooler in bf16, which the widening refuses: loaded with pread
REFUSED = ("gemma", "gemma2", "gemma3_text", "gemma-72", "bert-mlm")


def _save_gemma_72(folder):
    from transformers import AutoModel

    config = zoo.config_of("gemma")
    config.hidden_size = 72
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    zoo.tokenizer().save_pretrained(folder)


def _save_bert_mlm(folder):
    """A masked-LM checkpoint: AutoModel draws the pooler it lacks at load time."""
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    BertForMaskedLM(zoo.config_of("bert")).save_pretrained(folder)
    zoo.tokenizer().save_pretrained(folder)


def _save_bf16(family: str, folder):
    """The family's tiny checkpoint with every floating tensor stored as bf16."""
    if family == "bert-mlm":
        _save_bert_mlm(folder)
    elif family == "vit":
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


def _assert_same_model(ours: torch.nn.Module, plain: torch.nn.Module) -> None:
    for what in ("named_parameters", "named_buffers"):  # buffers: persistent or not
        theirs = dict(getattr(plain, what)())
        mine = dict(getattr(ours, what)())
        assert mine.keys() == theirs.keys()
        for name, tensor in mine.items():
            assert tensor.dtype == theirs[name].dtype, name
            assert torch.equal(tensor, theirs[name]), name
    assert ours.config.dtype == plain.config.dtype
    inputs = _inputs(plain)
    with torch.inference_mode():
        a = plain(**inputs, output_hidden_states=True).hidden_states
        b = ours(**inputs, output_hidden_states=True).hidden_states
    assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _spy(monkeypatch) -> list[str]:
    """The paths loads take: "released" (widened in place) or "pread"."""
    taken: list[str] = []
    widen, pread = widening.widen_in_place, widening.pread_reads

    def widen_in_place(*args):
        done = widen(*args)
        taken.extend(["released"] if done else [])
        return done

    monkeypatch.setattr(widening, "widen_in_place", widen_in_place)
    monkeypatch.setattr(widening, "pread_reads", lambda: taken.append("pread") or pread())
    return taken


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bf16_checkpoint_widened_equals_the_plain_float32_load(family, tmp_path, monkeypatch):
    folder = _save_bf16(family, tmp_path / family)
    taken = _spy(monkeypatch)
    torch.manual_seed(0)  # the same draws for weights the checkpoint lacks
    loaded = load_model(str(folder), device="cpu", dtype="float32")
    expected = "pread" if family in REFUSED or not widening.RELEASES else "released"
    assert taken == [expected]
    torch.manual_seed(0)
    _assert_same_model(loaded.model, _plain_float32(folder))


@pytest.mark.parametrize("family", ["bert", "qwen2", "whisper"])
def test_the_pread_path_equals_the_plain_float32_load_too(family, tmp_path, monkeypatch):
    folder = _save_bf16(family, tmp_path / family)
    taken = _spy(monkeypatch)
    monkeypatch.setattr(widening, "RELEASES", False)  # as on macOS / Windows
    loaded = load_model(str(folder), device="cpu", dtype="float32")
    assert taken == ["pread"]
    _assert_same_model(loaded.model, _plain_float32(folder))


def _mapped_kib(folder) -> int:
    """Resident KiB of this process's mappings of ``folder``'s files."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                inside = fields[-1].startswith(str(folder))
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not widening.RELEASES, reason="Linux: /proc/self/smaps and madvise")
def test_widening_in_place_hands_the_files_pages_back(tmp_path):
    """A half load's weights are views of the file mapping; once read they are resident. After
    widening, the mapping's pages are handed back while it is still mapped (a few boundary pages
    may stay), and re-read from the file when touched."""
    from transformers import AutoModel, GPT2Config, GPT2Model

    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=16384, n_positions=64)
    GPT2Model(config).to(torch.bfloat16).save_pretrained(tmp_path)  # 2 MiB of embeddings
    model, info = AutoModel.from_pretrained(
        tmp_path, dtype=torch.bfloat16, output_loading_info=True
    )
    float(sum(p.detach().float().sum() for p in model.parameters()))  # fault every page in
    assert _mapped_kib(tmp_path) > 2048  # the positive control: the file's pages are resident
    keep = model.wte.weight.data  # keeps the mapping alive, as the weights not yet widened do
    assert widening.widen_in_place(model, torch.float32, info)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert _mapped_kib(tmp_path) < 256
    assert torch.equal(keep.float(), model.wte.weight)  # a released page reads back from the file


def test_a_float32_checkpoint_keeps_its_mmap(tiny_bert_dir, monkeypatch):
    taken = _spy(monkeypatch)
    load_model(str(tiny_bert_dir), device="cpu", dtype="float32")
    assert taken == []
