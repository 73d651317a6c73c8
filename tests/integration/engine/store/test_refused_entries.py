"""Through the real loader and extraction: a valid cache entry of another model, corpus or
setting copied over a tiny BERT's file is not served; the BERT's own result is computed again and
the refusal counted (isoscope.engine.store.cache). A comparison entry of other parts likewise."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.inputs.corpus import corpus_from_text
from isoscope.engine.load.models import load_model
from isoscope.engine.store.cache import ResultCache, refused_entries
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.engine.store.entries import cache_key

pytestmark = pytest.mark.integration

SETTINGS = ExtractionSettings(max_length=32, sample_size=500)
TEXTS = "The bank of the river.\nA cat sat on the mat.\nSummer is warm.\n"


@pytest.fixture(scope="module")
def models(tiny_bert_dir, tiny_gpt2_dir):
    return {
        "bert": load_model(str(tiny_bert_dir), device="cpu"),
        "gpt2": load_model(str(tiny_gpt2_dir), device="cpu"),
    }


def _swaps():
    corpus = corpus_from_text(TEXTS)
    other_corpus = corpus_from_text("Winter is cold.\nSELECT * FROM users;\n")
    other_settings = ExtractionSettings(max_length=16, sample_size=500)
    return {  # (model, corpus, settings) of the entry copied over the bert's
        "another model": ("gpt2", corpus, SETTINGS),
        "another corpus": ("bert", other_corpus, SETTINGS),
        "another setting": ("bert", corpus, other_settings),
        "another model, corpus and setting": ("gpt2", other_corpus, other_settings),
    }


@pytest.mark.parametrize("swap", list(_swaps()))
def test_a_valid_entry_of_something_else_is_not_served(swap, models, tmp_path):
    bert = models["bert"]
    corpus = corpus_from_text(TEXTS)
    name, other_corpus, other_settings = _swaps()[swap]
    cache = ResultCache(tmp_path)
    own = cached_extract(bert, corpus, SETTINGS, cache=cache)
    foreign = cached_extract(models[name], other_corpus, other_settings, cache=cache)
    mine = cache.path(cache_key(bert.fingerprint, corpus.sha, SETTINGS))
    theirs = cache.path(cache_key(models[name].fingerprint, other_corpus.sha, other_settings))
    shutil.copyfile(theirs, mine)  # a valid entry, under the bert's name
    assert cache.load(mine.stem) is None
    again = cached_extract(bert, corpus, SETTINGS, cache=ResultCache(tmp_path))
    assert (again.model_fingerprint, again.corpus_sha) == (bert.fingerprint, corpus.sha)
    assert again.settings == SETTINGS and again.texts == corpus.texts
    assert (foreign.model_fingerprint, foreign.corpus_sha, foreign.settings) != (
        bert.fingerprint,
        corpus.sha,
        SETTINGS,
    )
    np.testing.assert_array_equal(again.mean, own.mean)
    assert refused_entries(tmp_path)[0] == 1  # counted once: the refused file is gone
    # the recomputed result replaced the foreign one: served from now on, nothing more refused
    count = refused_entries(tmp_path)[0]
    np.testing.assert_array_equal(cache.load(mine.stem).mean, own.mean)
    assert refused_entries(tmp_path)[0] == count


def test_a_comparison_entry_of_other_parts_is_not_served(models, tmp_path):
    from isoscope.analysis.compare.storage import cached_compare, comparison_key, comparison_source
    from isoscope.engine.extraction import extract

    corpus = corpus_from_text(TEXTS)
    ra = extract(models["bert"], corpus, SETTINGS)
    rb = extract(models["gpt2"], corpus, SETTINGS)
    from isoscope.analysis.compare.comparison import compare

    cache, calls = ResultCache(tmp_path), []

    def run(a, b):
        def go():
            calls.append((a, b))
            return compare(a, b)

        return go

    cached_compare(cache, comparison_source("ab"), run(ra, rb))
    cached_compare(cache, comparison_source("ba"), run(rb, ra))
    shutil.copyfile(cache.path(comparison_key("ba")), cache.path(comparison_key("ab")))
    got = cached_compare(cache, comparison_source("ab"), run(ra, rb))
    assert len(calls) == 3 and got.a.model == ra.model
    assert refused_entries(tmp_path)[0] == 1
