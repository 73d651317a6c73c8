"""An entry is served only as the entry of its key (isoscope.engine.store.cache, .entries): a
valid entry of another model, corpus or setting put under a key, a record edited or cut short,
a result that disagrees with its record: each is refused (a miss), logged and counted; an entry
from before entries carried a record is a plain miss."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace

import numpy as np
import pytest

from isoscope.engine.store.cache import REFUSED_FILE, ResultCache, refused_entries
from isoscope.engine.store.entries import (
    SOURCE_MEMBER,
    cache_key,
    entry_mismatch,
    result_arrays,
    result_mismatch,
    result_source,
)
from tests.unit.engine.store.test_cache import fake_result, key

pytestmark = pytest.mark.usefixtures("no_process_limit")


def _rewrite(path, edit) -> None:
    """Replace the entry at ``path`` with ``edit(its arrays)``, written as the cache writes."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    with path.open("wb") as fh:
        np.savez(fh, **edit(arrays))


def _record(arrays) -> dict:
    return json.loads(str(arrays[SOURCE_MEMBER]))


def _with_record(arrays, **changes) -> dict:
    return {**arrays, SOURCE_MEMBER: np.array(json.dumps(_record(arrays) | changes))}


def _swapped(other_seed: int):
    """Another result's valid entry, copied over the file of ``key(0)``."""

    def swap(cache: ResultCache) -> None:
        cache.save(key(other_seed), fake_result(other_seed))
        shutil.copyfile(cache.path(key(other_seed)), cache.path(key(0)))

    return swap


def _other_setting(cache: ResultCache) -> None:
    other = replace(fake_result(0), settings=replace(fake_result(0).settings, max_length=7))
    other_key = cache_key(other.model_fingerprint, other.corpus_sha, other.settings)
    cache.save(other_key, other)
    shutil.copyfile(cache.path(other_key), cache.path(key(0)))


def _other_model(cache: ResultCache) -> None:
    other = replace(fake_result(0), model_fingerprint="another-model")
    other_key = cache_key("another-model", other.corpus_sha, other.settings)
    cache.save(other_key, other)
    shutil.copyfile(cache.path(other_key), cache.path(key(0)))


def _edit(edit):
    def apply(cache: ResultCache) -> None:
        cache.save(key(0), fake_result(0))
        _rewrite(cache.path(key(0)), edit)

    return apply


# every way an entry can be another key's, or be edited after it was written
SWAPS = {
    "another model and corpus's entry": _swapped(1),
    "another model's entry": _other_model,
    "another setting's entry": _other_setting,
    "record edited to another model": _edit(lambda a: _with_record(a, model="fp9")),
    "record edited to another setting": _edit(
        lambda a: _with_record(a, settings={**_record(a)["settings"], "seed": 9})
    ),
    "record edited to another code version": _edit(lambda a: _with_record(a, v=-1)),
    "record cut short": _edit(lambda a: {**a, SOURCE_MEMBER: np.array(str(a[SOURCE_MEMBER])[:20])}),
    "record not a mapping": _edit(lambda a: {**a, SOURCE_MEMBER: np.array("[1, 2]")}),
    "result's fingerprint edited": _edit(
        lambda a: {
            **a,
            "meta": np.array(json.dumps(json.loads(str(a["meta"])) | {"model_fingerprint": "x"})),
        }
    ),
    "result's texts edited": _edit(lambda a: {**a, "texts": np.array(["another text"])}),
}


@pytest.mark.parametrize("swap", list(SWAPS.values()), ids=list(SWAPS))
def test_an_entry_that_is_not_its_keys_is_refused_logged_and_counted(swap, tmp_path, caplog):
    cache = ResultCache(tmp_path)
    swap(cache)
    assert cache.path(key(0)).exists()
    with caplog.at_level(logging.WARNING):
        assert cache.load(key(0)) is None
    assert not cache.path(key(0)).exists()  # removed: the next read is a plain miss
    assert cache.load(key(0)) is None
    assert any(
        "refused" in r.getMessage() and key(0)[:12] in r.getMessage() for r in caplog.records
    )
    count, last = refused_entries(tmp_path)
    assert count == 1 and key(0)[:12] in last
    usage = cache.usage()
    assert (
        usage.refused_count == count
        and "1 entry refused as not the result of its key" in usage.summary()
    )
    assert usage.to_dict()["refused_count"] == count
    # what replaces it is served again
    cache.save(key(0), fake_result(0))
    back = cache.load(key(0))
    np.testing.assert_array_equal(back.sample_vectors, fake_result(0).sample_vectors)
    assert refused_entries(tmp_path)[0] == count  # a served entry counts nothing


def test_an_entry_from_before_entries_carried_a_record_is_a_plain_miss(tmp_path, caplog):
    cache = ResultCache(tmp_path)
    cache.save(key(0), fake_result(0))
    _rewrite(cache.path(key(0)), lambda a: {k: v for k, v in a.items() if k != SOURCE_MEMBER})
    with caplog.at_level(logging.WARNING):
        assert cache.load(key(0)) is None
    assert not caplog.records and refused_entries(tmp_path) == (0, "")


def test_a_key_that_is_not_the_results_own_is_a_bug_not_an_entry(tmp_path):
    cache = ResultCache(tmp_path)
    with pytest.raises(ValueError, match="not the key of the record"):
        cache.save(key(1), fake_result(0))
    with pytest.raises(ValueError, match="not the key of the record"):
        cache.save_arrays("k", {"a": np.zeros(1)}, computed_from={"kind": "x"})
    assert not list(tmp_path.glob("*.npz"))


def test_the_checks_name_what_differs():
    result = fake_result(0)
    arrays = result_arrays(result) | {SOURCE_MEMBER: np.array(json.dumps(result_source(result)))}
    assert entry_mismatch(key(0), arrays) is None
    assert "computed from something else (kind extract, model fp0" in entry_mismatch(key(1), arrays)
    assert "damaged" in entry_mismatch(key(0), {**arrays, SOURCE_MEMBER: np.array("{")})
    record = result_source(result)
    assert result_mismatch(result, record) is None
    for field, what in (("model", "model fingerprint"), ("corpus", "corpus"), ("v", "version")):
        assert what in result_mismatch(result, record | {field: "other"})
    assert "texts do not hash" in result_mismatch(replace(result, texts=("x",)), record)


def test_clear_forgets_the_count(tmp_path):
    (tmp_path / REFUSED_FILE).write_text(json.dumps({"count": 3, "last": "why"}))
    cache = ResultCache(tmp_path)
    assert cache.usage().refused_count == 3
    cache.clear()
    assert cache.usage().refused_count == 0
    (tmp_path / REFUSED_FILE).write_text("not json")
    assert refused_entries(tmp_path) == (0, "")
