"""extract() on tiny random models (the forward pass): shapes, hidden state 0 = embedding output,
streaming statistics equal a direct computation over non-padding tokens, exclude_special and
exclude_first, truncation notices, token budgets, out-of-memory halving, grouped reductions, and
the batches it runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import (
    ExtractionSettings,
    encode_text,
    extract,
)
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import load_model
from tests.extraction_checks import TEXTS
from tests.extraction_checks import assert_same_result as _assert_same_result
from tests.extraction_checks import direct as _direct


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


@pytest.mark.parametrize("budget", [1, 40, 100_000])
def test_any_token_budget_gives_the_same_statistics_and_sample(tiny, corpus, budget):
    ref = extract(tiny, corpus, ExtractionSettings(sample_size=30, batch_size=4))
    got = extract(tiny, corpus, ExtractionSettings(sample_size=30, token_budget=budget))
    _assert_same_result(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.sample_vectors, ref.sample_vectors, atol=1e-5)


def test_out_of_memory_halves_the_batch_and_loses_nothing(tiny, corpus, monkeypatch):
    import isoscope.engine.extraction.forward as ex

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


def test_reducing_states_one_by_one_or_together_gives_the_same_result(tiny, corpus, monkeypatch):
    """State by state (the CPU's way), in groups of states (the GPUs'), in groups of one."""
    import isoscope.engine.extraction.forward as ex

    settings = ExtractionSettings(sample_size=30, batch_size=4)
    by_state = extract(tiny, corpus, settings)
    monkeypatch.setattr(ex, "_by_state", lambda states: False)
    together = extract(tiny, corpus, settings)
    monkeypatch.setattr(ex, "REDUCE_GROUP_BYTES", 1)  # one state per group
    monkeypatch.setattr(ex, "REDUCE_GROUP_BYTES_CPU", 1)
    one_by_one = extract(tiny, corpus, settings)
    for other in (together, one_by_one):
        _assert_same_result(other, by_state, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(other.sample_vectors, by_state.sample_vectors)


@pytest.mark.parametrize(("batch_size", "budget"), [(2, 100_000), (32, 40), (3, 25)])
def test_plan_batches_are_the_batches_extraction_runs(
    tiny, corpus, monkeypatch, batch_size, budget
):
    """The Ray driver plans chunks with plan_batches; they must be the batches a local run forms."""
    import isoscope.engine.extraction.forward as ex
    from isoscope.engine.budget.batching import plan_batches
    from isoscope.engine.extraction.tokenization import tokenize

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
