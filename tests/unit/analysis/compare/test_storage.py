"""A comparison on disk, without a model: named arrays plus one JSON ``meta`` string round-trip
every field, another layout is refused, the key hashes its parts, and :func:`cached_compare`
answers from the cache, recomputes a corrupt entry and still returns what it cannot store."""

from __future__ import annotations

import json

import numpy as np
import pytest

from isoscope.analysis.compare.cka import CKAResult
from isoscope.analysis.compare.records import Comparison, LNDifference, SideSummary
from isoscope.analysis.compare.storage import (
    COMPARISON_LAYOUT,
    cached_compare,
    comparison_arrays,
    comparison_from_arrays,
    comparison_key,
)


def _side(label: str, shift: float) -> SideSummary:
    rng = np.random.default_rng(int(shift))
    return SideSummary(
        label=label,
        model={"source": label.lower()},
        corpus_name="planted",
        state_names=("emb", "1"),
        anisotropy=np.array([0.1, 0.5 + shift]),
        isoscore=np.array([0.9, 0.2]),
        outliers=((), (5,)),
        mean=rng.normal(size=(2, 8)),
        top_k=1,
        top_share=np.array([0.2, 0.95]),
        top_dims=((3,), (5,)),
    )


def _comparison(full: bool = True) -> Comparison:
    a, b = _side("A", 0.0), _side("B", 1.0)
    states = [{"index": 0, "gained": [], "lost": []}, {"index": 1, "gained": [5], "lost": []}]
    if not full:
        return Comparison(a, b, states, cka=None, abs_mean_diff=None, ln=None, notes=("no CKA",))
    return Comparison(
        a,
        b,
        states,
        cka=CKAResult(np.array([[1.0, 0.3], [0.2, 0.8]]), "tokens", 600, False, "a note"),
        abs_mean_diff=np.abs(a.mean - b.mean),
        ln=LNDifference(["emb.ln"], np.full((1, 8), 0.25), np.zeros((1, 8))),
        notes=("one", "two"),
        sts_a=np.array([10.0, 20.0]),
        sts_b=np.array([11.0, 19.0]),
        extra={"seed": 3},
    )


def _assert_equal(got: Comparison, ref: Comparison) -> None:
    assert got.states == ref.states and got.notes == ref.notes and got.extra == ref.extra
    for side_got, side_ref in ((got.a, ref.a), (got.b, ref.b)):
        for f in ("label", "model", "corpus_name", "state_names", "outliers", "top_k", "top_dims"):
            assert getattr(side_got, f) == getattr(side_ref, f), f
        for f in ("anisotropy", "isoscore", "mean", "top_share"):
            np.testing.assert_array_equal(getattr(side_got, f), getattr(side_ref, f))
    for f in ("abs_mean_diff", "sts_a", "sts_b"):
        if getattr(ref, f) is None:
            assert getattr(got, f) is None, f
        else:
            np.testing.assert_array_equal(getattr(got, f), getattr(ref, f))
    assert (got.cka is None) == (ref.cka is None) and (got.ln is None) == (ref.ln is None)
    if ref.cka is not None:
        np.testing.assert_array_equal(got.cka.matrix, ref.cka.matrix)
        assert (got.cka.basis, got.cka.n, got.cka.debiased, got.cka.note) == (
            "tokens",
            600,
            False,
            "a note",
        )
    if ref.ln is not None:
        assert got.ln.names == ref.ln.names
        np.testing.assert_array_equal(got.ln.d_gamma, ref.ln.d_gamma)
        np.testing.assert_array_equal(got.ln.d_beta, ref.ln.d_beta)


@pytest.mark.parametrize("full", [True, False])
def test_arrays_round_trip_every_field_without_pickle(full):
    ref = _comparison(full)
    arrays = comparison_arrays(ref)
    assert all(a.dtype != object for a in arrays.values())  # loadable with allow_pickle=False
    assert json.loads(str(arrays["meta"]))["layout"] == COMPARISON_LAYOUT
    assert ("cka_matrix" in arrays) == full and ("sts_a" in arrays) == full
    _assert_equal(comparison_from_arrays(arrays), ref)


def test_another_layout_is_refused():
    arrays = comparison_arrays(_comparison())
    meta = json.loads(str(arrays["meta"]))
    meta["layout"] = COMPARISON_LAYOUT + 1
    arrays["meta"] = np.array(json.dumps(meta))
    with pytest.raises(ValueError, match="comparison layout"):
        comparison_from_arrays(arrays)


def test_the_key_is_a_stable_hash_of_its_parts():
    key = comparison_key("a", "b", 1)
    assert key == comparison_key("a", "b", 1) and len(key) == 32
    assert int(key, 16) >= 0  # hexadecimal
    assert key != comparison_key("b", "a", 1) and key != comparison_key("a", "b")


class _MemoryCache:
    """The two methods of ResultCache that cached_compare uses, in memory."""

    def __init__(self):
        self.stored: dict[str, dict] = {}

    def load_arrays(self, key):
        return self.stored.get(key)

    def save_arrays(self, key, arrays):
        self.stored[key] = dict(arrays)


def test_cached_compare_answers_from_the_cache_and_recomputes_a_corrupt_entry():
    cache, calls = _MemoryCache(), []

    def run():
        calls.append(1)
        return _comparison()

    first = cached_compare(cache, "k", run)
    assert len(calls) == 1 and set(cache.stored) == {"k"}
    _assert_equal(cached_compare(cache, "k", run), first)
    assert len(calls) == 1
    cache.stored["k"] = {"meta": np.array("{not json")}  # corrupt: a miss, recomputed, replaced
    _assert_equal(cached_compare(cache, "k", run), first)
    assert len(calls) == 2 and comparison_from_arrays(cache.stored["k"]) is not None
    cache.stored["k"] = {"meta": np.array(json.dumps({"layout": -1}))}  # an older layout: a miss
    _assert_equal(cached_compare(cache, "k", run), first)
    assert len(calls) == 3
    cache.stored["k"] = {"cka_matrix": np.eye(2)}  # no meta at all: a miss too
    _assert_equal(cached_compare(cache, "k", run), first)
    assert len(calls) == 4


def test_a_comparison_that_cannot_be_stored_is_still_returned():
    cache = _MemoryCache()
    odd = Comparison(**{**_comparison().__dict__, "extra": {"fn": object()}})
    assert cached_compare(cache, "k", lambda: odd) is odd
    assert cache.stored == {}
