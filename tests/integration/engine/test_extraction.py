"""The extraction package end to end: the disk cache round trip, the bundled MiniLM's rogue
dimension 223, and big checkpoints (sharded safetensors, bf16 weights, device_map) through the
real loader and extract (its stages: tests/integration/engine/extraction/)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.outliers import outlier_dims, strongest_dims
from isoscope.engine.extraction import (
    ExtractionSettings,
    TokenTable,
    extract,
)
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import load_model
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.engine.store.entries import cache_key
from tests.extraction_checks import TEXTS
from tests.extraction_checks import assert_same_result as _assert_same_result


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus(TEXTS, "test texts")


def test_disk_cache_round_trip(tiny_bert_dir, corpus, tmp_path, monkeypatch):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    settings = ExtractionSettings(sample_size=40, exclude_special=True)
    cache = ResultCache(tmp_path)
    first = cached_extract(loaded, corpus, settings, cache=cache)
    key = cache_key(loaded.fingerprint, corpus.sha, settings)
    assert cache.path(key).exists()

    def no_recompute(*args, **kwargs):
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr("isoscope.engine.extraction.extract", no_recompute)
    again = cached_extract(loaded, corpus, settings, cache=cache)
    for name in (
        "mean",
        "variance",
        "min",
        "max",
        "mean_abs",
        "argmin_count",
        "argmax_count",
        "sample_vectors",
        "sample_index",
    ):
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name), err_msg=name)
    for field in TokenTable.__dataclass_fields__:
        np.testing.assert_array_equal(
            getattr(again.tokens, field), getattr(first.tokens, field), err_msg=field
        )
    assert (again.texts, again.notices, again.settings, again.model) == (
        first.texts,
        first.notices,
        first.settings,
        first.model,
    )
    assert (again.corpus_sha, again.model_fingerprint) == (
        first.corpus_sha,
        first.model_fingerprint,
    )
    # Other settings, another key; a corrupt entry is ignored (recomputed), not an error.
    assert cache_key(loaded.fingerprint, corpus.sha, ExtractionSettings()) != key
    cache.path(key).write_bytes(b"not an npz")
    assert cache.load(key) is None


def test_minilm_dimension_223_is_a_top_outlier_in_states_2_to_5(minilm_result):
    """docs/methods.md (the bundled encoder): dim 223 is a strong negative outlier of all-MiniLM-L6-v2 in layers 1-5."""
    result = minilm_result
    assert result.state_names == ["emb", "1", "2", "3", "4", "5", "6"] and result.hidden_size == 384
    for state in range(2, 6):
        assert 223 in strongest_dims(result.mean[state], 3), state
        assert result.mean[state, 223] < -1.0
        assert 223 in outlier_dims(result, state)
    # The final LayerNorm zeroes it: it is no outlier in the last hidden state.
    assert 223 not in outlier_dims(result, 6)


# ----------------------------------------------------------------------------- engine (issue 9)

# ----------------------------------------------------------------------------- big checkpoints


def _saved_tiny_gpt2(folder, dtype=torch.float32, max_shard_size=None):
    from isoscope.engine.load.models import build_random_model, bundled_tokenizer

    tokenizer = bundled_tokenizer()
    model = build_random_model(
        "gpt2", {"layers": 2, "width": 32, "heads": 2, "seed": 3}, len(tokenizer)
    ).to(dtype)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(folder, **kwargs)
    tokenizer.save_pretrained(folder)
    return model


def test_sharded_safetensors_load_through_the_real_loader(tmp_path, corpus):
    whole_dir, shard_dir = tmp_path / "whole", tmp_path / "sharded"
    _saved_tiny_gpt2(whole_dir)
    _saved_tiny_gpt2(shard_dir, max_shard_size="200KB")
    shards = sorted(p.name for p in shard_dir.glob("*.safetensors"))
    assert len(shards) > 1 and (shard_dir / "model.safetensors.index.json").exists()
    whole = load_model(str(whole_dir), device="cpu")
    sharded = load_model(str(shard_dir), device="cpu")
    assert sharded.info.num_parameters == whole.info.num_parameters
    assert sharded.info.device_map is None
    a = extract(whole, corpus, ExtractionSettings(sample_size=20))
    b = extract(sharded, corpus, ExtractionSettings(sample_size=20))
    _assert_same_result(a, b)


def test_bf16_weights_load_as_the_requested_dtype(tmp_path, corpus):
    folder = tmp_path / "bf16"
    original = _saved_tiny_gpt2(folder, dtype=torch.bfloat16)
    loaded = load_model(str(folder), device="cpu")  # float32 on the CPU
    assert loaded.dtype == torch.float32 and loaded.info.dtype == "float32"
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
    np.testing.assert_array_equal(
        loaded.model.wte.weight.detach().numpy(), original.wte.weight.float().detach().numpy()
    )
    assert extract(loaded, corpus, ExtractionSettings(sample_size=10)).num_tokens > 0


def test_device_map_auto_on_one_device_and_the_placement_summary(tiny_gpt2_dir):
    from types import SimpleNamespace

    from isoscope.engine.errors import ModelLoadError
    from isoscope.engine.load.models import _device_map_summary

    loaded = load_model(str(tiny_gpt2_dir), device="cpu", device_map="auto")
    assert loaded.device.type == "cpu" and loaded.info.device_map is None  # all of it fits
    with pytest.raises(ModelLoadError, match="device map"):
        load_model(str(tiny_gpt2_dir), device="cpu", device_map="everywhere")
    fake = SimpleNamespace(
        hf_device_map={"wte": 0, "wpe": 0, "h.0": 0, "h.1": 1, "ln_f": "cpu"},
    )
    assert _device_map_summary(fake) == "cuda:0: wte … h.0 · cuda:1: h.1 · cpu: ln_f"
    assert _device_map_summary(SimpleNamespace(hf_device_map={"": "cuda:0"})) is None
