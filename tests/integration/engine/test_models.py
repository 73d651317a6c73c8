"""The one loader: checkpoint folders (safetensors; pickle only on opt-in), cached Hub ids (offline),
random:FAMILY models with seeds and sizes, and actionable ModelLoadErrors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from backend.engine.errors import ModelLoadError
from backend.engine.models import load_model, position_table, random_like

SMALL = "layers=1,width=16,heads=2"


def make_pickle_only(src: Path, dst: Path) -> Path:
    """Copy a checkpoint folder, replacing model.safetensors by a pickle pytorch_model.bin."""
    from safetensors.torch import load_file

    dst.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.suffix != ".safetensors":
            shutil.copy(path, dst / path.name)
    torch.save(load_file(src / "model.safetensors"), dst / "pytorch_model.bin")
    return dst


@pytest.fixture(scope="module")
def pickle_only_dir(tiny_bert_dir, tmp_path_factory) -> Path:
    return make_pickle_only(tiny_bert_dir, tmp_path_factory.mktemp("pickle-only"))


def test_tiny_bert_folder_loads(tiny_bert_dir):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    info = loaded.info
    assert (info.architecture, info.num_layers, info.hidden_size, info.num_heads) == (
        "BertModel",
        2,
        32,
        2,
    )
    assert not info.is_causal and not info.random_init and not info.has_mlm_head
    assert info.position_embedding.startswith("absolute")
    assert info.device == "cpu · float32" and loaded.dtype == torch.float32
    assert not loaded.model.training
    assert loaded.encoder is loaded.model
    assert position_table(loaded) is loaded.model.embeddings.position_embeddings
    # The fingerprint is stable across loads (cache keys) and names the head and dtype.
    assert load_model(str(tiny_bert_dir), device="cpu").fingerprint == loaded.fingerprint
    assert loaded.fingerprint.endswith("-base-float32")


def test_tiny_gpt2_folder_loads_as_causal(tiny_gpt2_dir, tiny_bert_dir):
    loaded = load_model(str(tiny_gpt2_dir), device="cpu")
    assert loaded.info.model_type == "gpt2" and loaded.info.is_causal
    assert (loaded.info.num_layers, loaded.info.hidden_size) == (2, 32)
    assert loaded.tokenizer.pad_token is not None
    assert position_table(loaded) is loaded.model.wpe
    assert loaded.fingerprint != load_model(str(tiny_bert_dir), device="cpu").fingerprint


def test_mlm_head_loads_and_exposes_the_encoder(tiny_bert_mlm_dir):
    loaded = load_model(str(tiny_bert_mlm_dir), device="cpu", head="mlm")
    assert loaded.info.has_mlm_head
    assert type(loaded.encoder).__name__ == "BertModel"
    base = load_model(str(tiny_bert_mlm_dir), device="cpu")
    assert type(base.model).__name__ == "BertModel" and base.fingerprint != loaded.fingerprint
    with pytest.raises(ModelLoadError, match="unknown head"):
        load_model(str(tiny_bert_mlm_dir), device="cpu", head="seq2seq")


def test_pickle_weights_need_the_opt_in(pickle_only_dir, tiny_bert_dir):
    with pytest.raises(ModelLoadError, match="only has pickle weights .*allow-pickle"):
        load_model(str(pickle_only_dir), device="cpu")
    loaded = load_model(str(pickle_only_dir), device="cpu", allow_pickle=True)
    reference = load_model(str(tiny_bert_dir), device="cpu")
    for (name, a), (_, b) in zip(
        loaded.model.state_dict().items(), reference.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_missing_and_uncached_sources_are_refused(tmp_path, tiny_bert_dir):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(str(tmp_path / "no-such-folder"), device="cpu")
    with pytest.raises(
        ModelLoadError, match="not in the local Hugging Face cache|neither a local folder"
    ):
        load_model("isoscope-test-org/surely-not-cached-model", device="cpu")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(str(tiny_bert_dir / "config.json"), device="cpu")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(empty), device="cpu")
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    shutil.copy(tiny_bert_dir / "config.json", no_weights / "config.json")
    with pytest.raises(ModelLoadError, match="no weight files"):
        load_model(str(no_weights), device="cpu")
    with pytest.raises(ModelLoadError, match="no model given"):
        load_model("  ", device="cpu")


@pytest.mark.parametrize(
    ("family", "causal", "has_table"),
    [
        ("bert", False, True),
        ("bert-nope", False, False),
        ("gpt2", True, True),
        ("gpt2-nope", True, False),
    ],
)
def test_random_families(family, causal, has_table):
    loaded = load_model(f"random:{family}:{SMALL},seed=3", device="cpu")
    info = loaded.info
    assert info.random_init and info.is_causal == causal
    assert (info.num_layers, info.hidden_size, info.num_heads) == (1, 16, 2)
    assert info.source == f"random:{family}:layers=1,width=16,heads=2,seed=3"
    table = position_table(loaded)
    assert (table is not None) == has_table
    if not has_table:
        raw = (
            loaded.encoder.embeddings.position_embeddings
            if family.startswith("bert")
            else loaded.encoder.wpe
        )
        assert torch.count_nonzero(raw.weight) == 0 and not raw.weight.requires_grad
        assert info.position_embedding.startswith("none")


def test_random_models_are_seeded():
    a = load_model(f"random:bert:{SMALL},seed=1", device="cpu").model.state_dict()
    b = load_model(f"random:bert:{SMALL},seed=1", device="cpu").model.state_dict()
    c = load_model(f"random:bert:{SMALL},seed=2", device="cpu").model.state_dict()
    key = "embeddings.word_embeddings.weight"
    assert torch.equal(a[key], b[key]) and not torch.equal(a[key], c[key])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("random:transformer", "unknown random model family"),
        ("random:bert:depth=3", "bad random-model option"),
        ("random:bert:layers=two", "needs a number"),
        ("random:bert:width=30,heads=4", "divisible"),
        ("random:gpt2:layers=1,width=16,heads=2", None),
    ],
)
def test_random_source_errors(source, message):
    if message is None:
        with pytest.raises(ModelLoadError, match="no masked-LM head"):
            load_model(source, device="cpu", head="mlm")
        return
    with pytest.raises(ModelLoadError, match=message):
        load_model(source, device="cpu")


def test_random_like_keeps_architecture_and_changes_weights(tiny_bert_dir):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    # The tiny checkpoint itself is a seed-0 random init, so seed 0 would rebuild it exactly.
    fresh = random_like(loaded, seed=1)
    assert fresh.info.random_init and fresh.info.num_layers == loaded.info.num_layers
    assert fresh.fingerprint != loaded.fingerprint
    key = "embeddings.word_embeddings.weight"
    assert not torch.equal(fresh.model.state_dict()[key], loaded.model.state_dict()[key])


# ----------------------------------------------------------------------------- character level


def test_canine_loads_with_its_molecule_states_at_character_positions(tmp_path):
    from backend.engine.corpus import corpus_from_text
    from backend.engine.extraction import ExtractionSettings, extract
    from tests.media_models import save_canine

    loaded = load_model(str(save_canine(tmp_path / "canine")), device="cpu")
    assert (
        loaded.info.modality == "text" and "molecules of 4 characters" in loaded.info.token_layout
    )
    result = extract(loaded, corpus_from_text("hello world"), ExtractionSettings(sample_size=8))
    assert result.num_states == loaded.info.num_layers + 1 > 3  # char, molecule and final states
    assert "".join(result.tokens.token[~result.tokens.is_special]) == "hello world"


def test_byt5_loads_its_encoder(tmp_path):
    from backend.engine.corpus import corpus_from_text
    from backend.engine.extraction import ExtractionSettings, extract
    from tests.media_models import save_byt5

    loaded = load_model(str(save_byt5(tmp_path / "byt5")), device="cpu")
    assert not loaded.info.is_causal and loaded.info.num_layers == 2
    result = extract(loaded, corpus_from_text("héllo"), ExtractionSettings(sample_size=8))
    assert result.num_states == 3 and result.num_tokens == len("héllo".encode()) + 1  # + </s>


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

    from backend.engine.models import _load_folder

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=500, n_positions=64)
    GPT2Model(config).to(torch.bfloat16).save_pretrained(tmp_path)
    spy = _Float32Spy(numel=32 * 32)  # the smallest weight matrix
    with spy.mode:
        loaded = _load_folder(
            tmp_path, "bf16", "bf16", allow_pickle=False, head="base", dtype=requested
        )
    assert {p.dtype for p in loaded["model"].parameters()} == {requested}
    if requested == torch.bfloat16:
        assert spy.made == []
    else:
        assert spy.made  # the spy sees float32 weights when they are made
