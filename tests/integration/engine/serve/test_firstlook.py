"""A first look on a device's first run (backend/engine/serve/firstlook.py): measured on the first batch,
cut to the prefix that fits, cached as a corpus of its own, and no text extracted twice."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.budget import page_budget, throughput
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import load_model
from isoscope.engine.serve import firstlook
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.entries import cache_key

SETTINGS = ExtractionSettings(sample_size=200, max_length=16, batch_size=8)


@pytest.fixture(autouse=True)
def _plans_to_the_whole_budget(monkeypatch):
    """The budgets below are computed to the text; the planned share is tested on its own."""
    monkeypatch.setattr(page_budget, "PLANNED_SHARE", 1.0)


@pytest.fixture
def tiny(tiny_bert_dir):
    return load_model(str(tiny_bert_dir), device="cpu")


@pytest.fixture
def timed_parts(monkeypatch):
    """The partial extractions run, with a fixed clock: each text's batch takes 1 s per token."""
    calls = []
    real = firstlook.extract_partial

    def timed(loaded, texts, settings, *, text_ids, progress):
        part = real(loaded, texts, settings, text_ids=text_ids, progress=progress)
        counts = throughput.token_counts(loaded.tokenizer, texts, settings.max_length)
        part.seconds = float(sum(counts))
        calls.append(list(text_ids))
        return part

    monkeypatch.setattr(firstlook, "extract_partial", timed)
    return calls


def _corpus(n: int) -> Corpus:
    return Corpus(tuple(f"Sentence number {i} talks about topic {i % 7}." for i in range(n)), "c")


def test_the_first_batch_sizes_the_prefix_and_no_text_runs_twice(tiny, tmp_path, timed_parts):
    corpus = _corpus(40)
    counts = throughput.token_counts(tiny.tokenizer, corpus.texts, SETTINGS.max_length)
    cache = ResultCache(tmp_path)
    # 1 s per token: the load and the first 20 texts fit (the statistics' prior is microseconds)
    budget = tiny.load_seconds + page_budget.FRAME_SECONDS + float(sum(counts[:20])) + 0.5
    plan = firstlook.measured_first_look(tiny, corpus, counts, SETTINGS, cache, budget_s=budget)
    assert plan is not None and plan.first_batch
    assert (plan.texts, plan.total_texts) == (20, 40)
    assert timed_parts == [list(range(8)), list(range(8, 20))]  # the first batch, then the rest
    assert (
        plan.corpus.texts == corpus.texts[:20] and "measured on its first batch" in plan.describe()
    )
    cached = cache.load(cache_key(tiny.fingerprint, plan.corpus.sha, SETTINGS))
    direct = extract(tiny, plan.corpus, SETTINGS)  # the prefix as a plain extraction
    assert cached.num_texts == 20 and cached.num_tokens == direct.num_tokens
    np.testing.assert_allclose(cached.mean, direct.mean, rtol=1e-4, atol=1e-5)
    assert cache.load(cache_key(tiny.fingerprint, corpus.sha, SETTINGS)) is None  # not the whole
    # A later plan, from whatever speed was recorded since, names the same prefix (its cache hit).
    throughput.record(tmp_path, throughput.device_key(tiny.device), 10**6, 1, 1e3)
    later = firstlook.plan(tiny, corpus, counts, SETTINGS, tmp_path)
    assert later is not None and later.corpus.sha == plan.corpus.sha


def test_a_corpus_that_fits_is_the_whole_corpus_under_its_own_key(tiny, tmp_path, timed_parts):
    corpus = _corpus(12)
    counts = throughput.token_counts(tiny.tokenizer, corpus.texts, SETTINGS.max_length)
    cache = ResultCache(tmp_path)
    plan = firstlook.measured_first_look(tiny, corpus, counts, SETTINGS, cache, budget_s=1e9)
    assert plan is None and timed_parts == [list(range(8)), list(range(8, 12))]
    assert cache.load(cache_key(tiny.fingerprint, corpus.sha, SETTINGS)).num_texts == 12
    rate = throughput.seconds_per_token_parameter(
        tmp_path, "cpu", throughput.parameter_count(tiny.model)
    )
    assert rate is not None  # the run's speed is kept for the next estimate
