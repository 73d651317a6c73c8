"""A comparison through the real loader and extraction, cached on disk (isoscope.analysis.compare.storage):
read back in a new process, a corrupt entry recomputed, and a two-corpora comparison (no CKA, no
LayerNorm) round-tripping."""

from __future__ import annotations

import pytest

from isoscope.analysis.compare.comparison import compare
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.corpus import corpus_from_text
from isoscope.engine.inputs.pairs import sts_sample
from isoscope.engine.load.models import load_model
from tests.comparison_inputs import assert_same_comparison as _assert_same_comparison

SMALL = ExtractionSettings(max_length=32, sample_size=2000)


@pytest.fixture(scope="module")
def small_corpus(bundled):
    return corpus_from_text("\n".join(bundled.texts[:60]), name="bundled, first 60")


def test_a_comparison_is_cached_on_disk_and_a_corrupt_entry_is_recomputed(
    tiny_bert_dir, small_corpus, tmp_path
):
    from isoscope.analysis.compare.storage import cached_compare, comparison_key
    from isoscope.engine.store.cache import ResultCache

    a = load_model(str(tiny_bert_dir), device="cpu")
    b = load_model(f"random-like:{tiny_bert_dir}", device="cpu")
    ra, rb = extract(a, small_corpus, SMALL), extract(b, small_corpus, SMALL)
    calls = []

    def run():
        calls.append(1)
        return compare(ra, rb, loaded_a=a, loaded_b=b, pairs=sts_sample())

    cache = ResultCache(tmp_path)
    key = comparison_key("a", "b", a.fingerprint, b.fingerprint)
    ref = cached_compare(cache, key, run)
    assert ref.cka is not None and ref.ln is not None and ref.sts_a is not None
    assert cache.usage().results_count == 1

    got = cached_compare(ResultCache(tmp_path), key, run)  # a new process: from the disk
    assert len(calls) == 1
    _assert_same_comparison(got, ref)

    cache.path(key).write_bytes(b"not an npz")  # corrupt: a miss, recomputed and replaced
    again = cached_compare(ResultCache(tmp_path), key, run)
    assert len(calls) == 2
    _assert_same_comparison(again, ref)
    assert cached_compare(ResultCache(tmp_path), key, run) is not None and len(calls) == 2


def test_two_corpora_comparison_round_trips_through_the_cache(
    tiny_bert_dir, small_corpus, tmp_path
):
    from isoscope.analysis.compare.storage import cached_compare, comparison_key
    from isoscope.engine.store.cache import ResultCache

    a = load_model(str(tiny_bert_dir), device="cpu")
    other = corpus_from_text("def main():\n    return 0\nSELECT * FROM users;\n")
    ref = compare(extract(a, small_corpus, SMALL), extract(a, other, SMALL), loaded_a=a, loaded_b=a)
    assert ref.cka is None and ref.ln is None
    key = comparison_key("two corpora")
    cached_compare(ResultCache(tmp_path), key, lambda: ref)
    got = cached_compare(ResultCache(tmp_path), key, lambda: pytest.fail("recomputed"))
    _assert_same_comparison(got, ref)
