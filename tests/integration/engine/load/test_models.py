"""The one loader: checkpoint folders (safetensors; pickle only on opt-in), cached Hub ids (offline),
random:FAMILY models with seeds and sizes, and actionable ModelLoadErrors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.models import load_model, position_table, random_like


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
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from tests.media_models import save_canine

    loaded = load_model(str(save_canine(tmp_path / "canine")), device="cpu")
    assert (
        loaded.info.modality == "text" and "molecules of 4 characters" in loaded.info.token_layout
    )
    result = extract(loaded, corpus_from_text("hello world"), ExtractionSettings(sample_size=8))
    assert result.num_states == loaded.info.num_layers + 1 > 3  # char, molecule and final states
    assert "".join(result.tokens.token[~result.tokens.is_special]) == "hello world"


def test_byt5_loads_its_encoder(tmp_path):
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from tests.media_models import save_byt5

    loaded = load_model(str(save_byt5(tmp_path / "byt5")), device="cpu")
    assert not loaded.info.is_causal and loaded.info.num_layers == 2
    result = extract(loaded, corpus_from_text("héllo"), ExtractionSettings(sample_size=8))
    assert result.num_states == 3 and result.num_tokens == len("héllo".encode()) + 1  # + </s>


def test_only_a_big_model_on_the_cpu_changes_how_freed_memory_goes_back(tiny_bert_dir, monkeypatch):
    from isoscope.engine.load import models

    calls = []
    monkeypatch.setattr(models, "give_back_large_frees", lambda: calls.append(1) or True)
    load_model(str(tiny_bert_dir), device="cpu")
    assert calls == []  # a tiny model keeps glibc's defaults
    monkeypatch.setattr(models, "BIG_WEIGHTS_BYTES", 1)
    load_model(str(tiny_bert_dir), device="cpu")
    assert calls == [1]
