"""Extraction on tiny random models: shapes, hidden state 0 = embedding output, streaming statistics
equal a direct computation over non-padding tokens, exclude_special, truncation notice, the token
sample, the disk cache; and the bundled MiniLM's rogue dimension 223."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backend.analysis.geometry.outliers import outlier_dims, strongest_dims
from backend.engine.cache import ResultCache, cache_key, cached_extract
from backend.engine.corpus import Corpus
from backend.engine.errors import InputError
from backend.engine.extraction import (
    ExtractionSettings,
    TokenTable,
    encode_text,
    extract,
    mean_pooled,
)
from backend.engine.models import load_model

TEXTS = (
    "The bank raised its interest rates again.",
    "We sat on the river bank, watching the water.",
    "Short one.",
    "A much longer sentence, with commas, punctuation; and several clauses that go on for a while!",
    "Tokens: [brackets], (parens) & symbols?",
    "Why?",
)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus(TEXTS, "test texts")


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def tiny(request, tiny_bert_dir, tiny_gpt2_dir):
    folder = tiny_bert_dir if request.param == "bert" else tiny_gpt2_dir
    return load_model(str(folder), device="cpu")


def _direct(loaded, texts, exclude_special=False):
    """Token vectors (S, n, d) float64 of every text run alone (no padding), in text order."""
    parts, tables = [], []
    for text in texts:
        hidden, table = encode_text(loaded, text)
        keep = ~table.is_special if exclude_special else np.ones(len(table), dtype=bool)
        parts.append(hidden[:, keep].astype(np.float64))
        tables.append(table.take(np.flatnonzero(keep)))
    return np.concatenate(parts, axis=1), tables


def test_shapes_and_metadata(tiny, corpus):
    result = extract(tiny, corpus, ExtractionSettings(batch_size=4, sample_size=50))
    S, d = tiny.info.num_layers + 1, tiny.info.hidden_size
    for name in ("mean", "variance", "min", "max", "mean_abs", "argmin_count", "argmax_count"):
        assert getattr(result, name).shape == (S, d), name
    assert result.state_names == ["emb", "1", "2"]
    lengths = [len(tiny.tokenizer(t)["input_ids"]) for t in TEXTS]
    assert result.num_tokens == sum(lengths) == len(result.tokens)
    assert result.argmin_count.sum(axis=1).tolist() == [sum(lengths)] * S
    assert np.bincount(result.tokens.text_id).tolist() == lengths
    assert result.sample_vectors.shape == (S, 50, d) and result.sample_vectors.dtype == np.float32
    assert np.all(np.diff(result.sample_index) > 0)
    assert result.num_texts == len(TEXTS) and result.texts == TEXTS
    if tiny.info.model_type == "bert":
        first = result.tokens.take(np.flatnonzero(result.tokens.text_id == 0))
        assert (
            first.token[0] == "[CLS]"
            and first.token[-1] == "[SEP]"
            and first.is_special[[0, -1]].all()
        )
        assert first.position.tolist() == list(range(len(first)))
        assert first.word_id[0] == -1
    assert result.tokens.is_punct[result.tokens.token == ","].all()


def test_hidden_state_zero_is_the_embedding_output(tiny):
    hidden, table = encode_text(tiny, TEXTS[0])
    ids = torch.tensor([tiny.tokenizer(TEXTS[0])["input_ids"]])
    enc = tiny.encoder
    with torch.inference_mode():
        if tiny.info.model_type == "bert":
            expected = enc.embeddings(input_ids=ids)
        else:
            expected = enc.wte(ids) + enc.wpe(torch.arange(ids.shape[1])[None])
    np.testing.assert_allclose(hidden[0], expected[0].numpy(), atol=1e-6)
    assert hidden.shape == (tiny.info.num_layers + 1, ids.shape[1], tiny.info.hidden_size)
    assert table.token.tolist() == tiny.tokenizer.convert_ids_to_tokens(ids[0].tolist())


@pytest.mark.parametrize("exclude_special", [False, True])
def test_streaming_stats_equal_direct_computation(tiny, corpus, exclude_special):
    """Batched, length-sorted, padded extraction == each text alone, over non-padding tokens."""
    result = extract(
        tiny,
        corpus,
        ExtractionSettings(batch_size=4, sample_size=60, exclude_special=exclude_special),
    )
    x, tables = _direct(tiny, TEXTS, exclude_special)
    assert x.shape[1] == result.num_tokens
    np.testing.assert_allclose(result.mean, x.mean(axis=1), atol=1e-5)
    np.testing.assert_allclose(result.variance, x.var(axis=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(result.min, x.min(axis=1), atol=1e-5)
    np.testing.assert_allclose(result.max, x.max(axis=1), atol=1e-5)
    np.testing.assert_allclose(result.mean_abs, np.abs(x).mean(axis=1), atol=1e-5)
    d = x.shape[2]
    argmin = np.stack([np.bincount(x[s].argmin(axis=1), minlength=d) for s in range(x.shape[0])])
    # Padding changes float rounding slightly; a near-tie may flip at most a couple of tokens.
    assert np.abs(result.argmin_count - argmin).sum() <= 4
    # Token table in text order, and the sample rows are the tokens they claim to be.
    assert result.tokens.token.tolist() == [t for table in tables for t in table.token.tolist()]
    np.testing.assert_allclose(
        result.sample_vectors, x[:, result.sample_index].astype(np.float32), atol=1e-5
    )
    if exclude_special:
        assert not result.tokens.is_special.any()
        if tiny.info.model_type == "bert":
            assert (
                result.num_tokens
                == sum(len(t) for t in tables)
                == extract(tiny, corpus).num_tokens - 2 * len(TEXTS)
            )


def test_statistics_do_not_depend_on_batch_size(tiny, corpus):
    a = extract(tiny, corpus, ExtractionSettings(batch_size=1, sample_size=30))
    b = extract(tiny, corpus, ExtractionSettings(batch_size=32, sample_size=30))
    np.testing.assert_allclose(a.mean, b.mean, atol=1e-5)
    np.testing.assert_allclose(a.variance, b.variance, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(a.sample_index, b.sample_index)  # the seed fixes the sample


def test_truncation_and_sample_notices(tiny_bert_dir):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    long_text = " ".join(["word"] * 40)
    result = extract(
        loaded,
        Corpus((long_text, "short text"), "t"),
        ExtractionSettings(max_length=8, sample_size=5),
    )
    assert any("1 text(s) were cut to 8 tokens" in n for n in result.notices)
    assert np.bincount(result.tokens.text_id).tolist()[0] == 8
    assert any("random sample of 5 of" in n for n in result.notices)
    quiet = extract(
        loaded, Corpus(("short text", "another"), "t"), ExtractionSettings(max_length=8)
    )
    assert not any("cut to" in n for n in quiet.notices)


def test_only_special_tokens_left_is_an_input_error(tiny_bert_dir):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    with pytest.raises(InputError):
        ExtractionSettings(max_length=1)
    # max_length=2 keeps just [CLS] and [SEP]: nothing left once special tokens are excluded.
    with pytest.raises(InputError, match="no tokens left"):
        extract(
            loaded,
            Corpus(("hello world",), "t"),
            ExtractionSettings(max_length=2, exclude_special=True),
        )


def test_mean_pooled_matches_per_text_mean(tiny):
    pooled = mean_pooled(tiny, TEXTS[:3], batch_size=2)
    for i, text in enumerate(TEXTS[:3]):
        hidden, _ = encode_text(tiny, text)
        np.testing.assert_allclose(pooled[:, i], hidden.astype(np.float64).mean(axis=1), atol=1e-5)


def test_disk_cache_round_trip(tiny_bert_dir, corpus, tmp_path, monkeypatch):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    settings = ExtractionSettings(sample_size=40, exclude_special=True)
    cache = ResultCache(tmp_path)
    first = cached_extract(loaded, corpus, settings, cache=cache)
    key = cache_key(loaded.fingerprint, corpus.sha, settings)
    assert cache.path(key).exists()

    def no_recompute(*args, **kwargs):
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr("backend.engine.extraction.extract", no_recompute)
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
    """METHODS.md section 6: dim 223 is a strong negative outlier of all-MiniLM-L6-v2 in layers 1-5."""
    result = minilm_result
    assert result.state_names == ["emb", "1", "2", "3", "4", "5", "6"] and result.hidden_size == 384
    for state in range(2, 6):
        assert 223 in strongest_dims(result.mean[state], 3), state
        assert result.mean[state, 223] < -1.0
        assert 223 in outlier_dims(result, state)
    # The final LayerNorm zeroes it: it is no outlier in the last hidden state.
    assert 223 not in outlier_dims(result, 6)


# ----------------------------------------------------------------------------- engine (issue 9)

_STATS = ("mean", "variance", "min", "max", "mean_abs")


def _assert_same_result(a, b, rtol=1e-12, atol=1e-12):
    for name in _STATS:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=rtol, atol=atol)
    np.testing.assert_array_equal(a.sample_index, b.sample_index)
    for f in TokenTable.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(a.tokens, f), getattr(b.tokens, f), err_msg=f)


def test_sample_is_the_k_smallest_hash_priorities(tiny, corpus):
    """The partition-independent rule: priority = seeded splitmix64 of (text, position)."""
    from backend.engine.extraction import token_priority

    result = extract(tiny, corpus, ExtractionSettings(sample_size=25, seed=7))
    pri = token_priority(7, result.tokens.text_id, result.tokens.position)
    assert len(np.unique(pri)) == len(pri)
    np.testing.assert_array_equal(result.sample_index, np.sort(np.argsort(pri)[:25]))
    other_seed = extract(tiny, corpus, ExtractionSettings(sample_size=25, seed=8))
    assert not np.array_equal(other_seed.sample_index, result.sample_index)


def test_uneven_partial_extractions_merge_to_the_single_run(tiny, corpus):
    """Parts of 1, 3 and 2 texts (out of order), merged in any grouping == one process."""
    from backend.engine.extraction import extract_partial, finish

    settings = ExtractionSettings(sample_size=20, token_budget=64)
    whole = extract(tiny, corpus, settings)
    groups = [[4], [0, 5, 2], [1, 3]]
    parts = [extract_partial(tiny, [TEXTS[i] for i in g], settings, text_ids=g) for g in groups]
    merged = parts[2].merge(parts[0]).merge(parts[1])
    result = finish(merged, corpus)
    _assert_same_result(result, whole, rtol=1e-5, atol=1e-5)  # different padding: float32 forward
    np.testing.assert_array_equal(result.argmax_count.sum(axis=1), whole.argmax_count.sum(axis=1))
    np.testing.assert_allclose(result.sample_vectors, whole.sample_vectors, atol=1e-5)
    # An empty part merges as a no-op.
    empty = extract_partial(tiny, [], settings, text_ids=[])
    _assert_same_result(finish(merged.merge(empty), corpus), result)
    with pytest.raises(ValueError, match="same texts"):
        parts[0].merge(extract_partial(tiny, [TEXTS[4]], settings, text_ids=[4]))
    with pytest.raises(ValueError, match="covers"):
        finish(extract_partial(tiny, list(TEXTS[:2]), settings), corpus)


def test_merge_order_changes_stats_only_by_float64_rounding(tiny, corpus):
    from backend.engine.extraction import extract_partial, finish

    settings = ExtractionSettings(sample_size=15, batch_size=1)  # one text per batch everywhere
    parts = lambda: [  # noqa: E731
        extract_partial(tiny, [t], settings, text_ids=[i]) for i, t in enumerate(TEXTS)
    ]
    fwd = parts()
    for p in fwd[1:]:
        fwd[0].merge(p)
    rev = parts()
    for p in rev[:-1][::-1]:
        rev[-1].merge(p)
    a, b = finish(fwd[0], corpus), finish(rev[-1], corpus)
    _assert_same_result(a, b)
    np.testing.assert_array_equal(a.sample_vectors, b.sample_vectors)
    np.testing.assert_array_equal(a.argmin_count, b.argmin_count)
    _assert_same_result(a, extract(tiny, corpus, settings))


@pytest.mark.parametrize("budget", [1, 40, 100_000])
def test_any_token_budget_gives_the_same_statistics_and_sample(tiny, corpus, budget):
    ref = extract(tiny, corpus, ExtractionSettings(sample_size=30, batch_size=4))
    got = extract(tiny, corpus, ExtractionSettings(sample_size=30, token_budget=budget))
    _assert_same_result(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.sample_vectors, ref.sample_vectors, atol=1e-5)


def test_out_of_memory_halves_the_batch_and_loses_nothing(tiny, corpus, monkeypatch):
    import backend.engine.extraction.forward as ex

    settings = ExtractionSettings(sample_size=30, batch_size=32)
    ref = extract(tiny, corpus, settings)
    real = ex.forward_hidden_states
    calls = {"n": 0, "sizes": []}

    def flaky(loaded, ids, mask):
        calls["n"] += 1
        calls["sizes"].append(ids.shape[0])
        if calls["n"] == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(loaded, ids, mask)

    monkeypatch.setattr(ex, "forward_hidden_states", flaky)
    heard = []
    got = extract(tiny, corpus, settings, on_notice=heard.append)
    assert calls["sizes"][:2] == [len(TEXTS), len(TEXTS) // 2]
    assert len(heard) == 1 and "out of memory" in heard[0]
    assert sum("out of memory" in n for n in got.notices) == 1
    _assert_same_result(got, ref, rtol=1e-4, atol=1e-5)

    def always(loaded, ids, mask):
        raise RuntimeError("MPS backend out of memory")

    monkeypatch.setattr(ex, "forward_hidden_states", always)
    with pytest.raises(InputError, match="single text"):
        extract(tiny, corpus, settings)

    def bug(loaded, ids, mask):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(ex, "forward_hidden_states", bug)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        extract(tiny, corpus, settings)


def test_exclude_first_drops_position_zero(tiny, corpus):
    full = extract(tiny, corpus, ExtractionSettings(sample_size=20))
    got = extract(tiny, corpus, ExtractionSettings(sample_size=20, exclude_first=True))
    assert got.num_tokens == full.num_tokens - len(TEXTS)
    assert (got.tokens.position > 0).all()
    x = np.concatenate([encode_text(tiny, t)[0][:, 1:].astype(np.float64) for t in TEXTS], axis=1)
    np.testing.assert_allclose(got.mean, x.mean(axis=1), atol=1e-5)
    assert (got.sample_tokens.position > 0).all()


def test_sample_budget_caps_tokens_per_state(tiny, corpus):
    S, d = tiny.info.num_layers + 1, tiny.info.hidden_size
    budget = S * d * 4 * 12 + 5  # room for 12 tokens
    got = extract(tiny, corpus, ExtractionSettings(sample_size=40, sample_budget_bytes=budget))
    assert got.sample_vectors.shape == (S, 12, d)
    assert any("12 tokens per state to stay within" in n for n in got.notices)
    wide = extract(tiny, corpus, ExtractionSettings(sample_size=40))
    np.testing.assert_array_equal(  # a budget cap keeps a prefix of the priority order
        np.intersect1d(got.sample_index, wide.sample_index), got.sample_index
    )
    from backend.engine.extraction import sample_limit

    with pytest.raises(InputError, match="fewer than 2 tokens"):
        sample_limit(ExtractionSettings(sample_budget_bytes=1024), 33, 4096)
    assert sample_limit(ExtractionSettings(), 33, 4096) == (1 << 30) // (33 * 4096 * 4) == 1985


# ----------------------------------------------------------------------------- big checkpoints


def _saved_tiny_gpt2(folder, dtype=torch.float32, max_shard_size=None):
    from backend.engine.models import build_random_model, bundled_tokenizer

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

    from backend.engine.errors import ModelLoadError
    from backend.engine.models import _device_map_summary

    loaded = load_model(str(tiny_gpt2_dir), device="cpu", device_map="auto")
    assert loaded.device.type == "cpu" and loaded.info.device_map is None  # all of it fits
    with pytest.raises(ModelLoadError, match="device map"):
        load_model(str(tiny_gpt2_dir), device="cpu", device_map="everywhere")
    fake = SimpleNamespace(
        hf_device_map={"wte": 0, "wpe": 0, "h.0": 0, "h.1": 1, "ln_f": "cpu"},
    )
    assert _device_map_summary(fake) == "cuda:0: wte … h.0 · cuda:1: h.1 · cpu: ln_f"
    assert _device_map_summary(SimpleNamespace(hf_device_map={"": "cuda:0"})) is None


def test_planned_sample_equals_the_streaming_selection():
    """extract_partial plans the sample before any forward pass; the Ray engine still streams
    candidates with select/commit. Both keep the same tokens, and ordered() returns them in
    (text, position) order."""
    from backend.engine.extraction import SampleCandidates, token_priority

    rng = np.random.default_rng(0)
    text_id = np.repeat(np.arange(40), rng.integers(1, 30, size=40))
    position = np.concatenate([np.arange(c) for c in np.bincount(text_id)])
    priority = token_priority(3, text_id, position)
    vectors = rng.normal(size=(2, len(priority), 4)).astype(np.float32)
    planned, slot = SampleCandidates.planned(50, 2, 4, priority, text_id, position)
    for batch in np.array_split(rng.permutation(len(priority)), 9):  # any batch order
        chosen = batch[slot[batch] >= 0]
        planned.write(0, slot[chosen], vectors[:, chosen])
    streamed = SampleCandidates(50, 2, 4, capacity=len(priority))
    for batch in np.array_split(np.arange(len(priority)), 7):
        entering, evicted = streamed.select(priority[batch])
        pick = batch[entering]
        streamed.commit(evicted, priority[pick], text_id[pick], position[pick], vectors[:, pick])
    for got, ref in zip(planned.ordered(), streamed.ordered(), strict=True):
        np.testing.assert_array_equal(got, ref)
    assert (slot >= 0).sum() == 50


def test_sample_buffer_is_zeroed_writable_and_picklable():
    import pickle

    from backend.engine.extraction.sample import _zeros

    for shape in ((3, 5, 2), (4, 1000, 600)):  # below and above the pre-faulted size
        buf = _zeros(shape, np.float32)
        assert buf.shape == shape and buf.dtype == np.float32 and not buf.any()
        buf[1, 2, 1] = 7.0
        copy = pickle.loads(pickle.dumps(buf))
        assert copy[1, 2, 1] == 7.0 and copy.shape == shape


def test_reducing_states_one_by_one_or_together_gives_the_same_result(tiny, corpus, monkeypatch):
    import backend.engine.extraction.forward as ex

    settings = ExtractionSettings(sample_size=30, batch_size=4)
    together = extract(tiny, corpus, settings)
    monkeypatch.setattr(ex, "REDUCE_GROUP_BYTES", 1)  # one state per group
    one_by_one = extract(tiny, corpus, settings)
    _assert_same_result(one_by_one, together, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(one_by_one.sample_vectors, together.sample_vectors)


@pytest.mark.parametrize(("batch_size", "budget"), [(2, 100_000), (32, 40), (3, 25)])
def test_plan_batches_are_the_batches_extraction_runs(
    tiny, corpus, monkeypatch, batch_size, budget
):
    """The Ray driver plans chunks with plan_batches; they must be the batches a local run forms."""
    import backend.engine.extraction.forward as ex
    from backend.engine.extraction.tokenization import plan_batches, tokenize

    seen: list[list[int]] = []
    real = ex._forward_batch

    def spy(loaded, plan, rows, pad_id, sample):
        seen.append([int(r) for r in rows])
        return real(loaded, plan, rows, pad_id, sample)

    monkeypatch.setattr(ex, "_forward_batch", spy)
    settings = ExtractionSettings(batch_size=batch_size, token_budget=budget)
    extract(tiny, corpus, settings)
    lengths = tokenize(tiny, corpus.texts, settings.max_length).lengths
    planned = plan_batches(lengths, batch_size, budget)
    assert [b.tolist() for b in planned] == seen
    assert len(seen) > 1 and all(len(b) <= batch_size for b in seen)
    assert all(len(b) == 1 or len(b) * lengths[b].max() <= budget for b in planned)
