"""A comparison on disk: named arrays plus one JSON ``meta`` string (no pickle), entries of the
extraction cache (:class:`isoscope.engine.store.cache.ResultCache`) under a key of what determines them."""

from __future__ import annotations

import json

import numpy as np

from isoscope.analysis.compare.cka import CKAResult
from isoscope.analysis.compare.records import Comparison, LNDifference, SideSummary

COMPARISON_LAYOUT = 1  # bump when Comparison or compare() changes what it stores
_SIDE_ARRAYS = ("anisotropy", "isoscore", "mean", "top_share")
_OPTIONAL_ARRAYS = ("abs_mean_diff", "sts_a", "sts_b")


def comparison_arrays(comparison: Comparison) -> dict[str, np.ndarray]:
    """``comparison`` as named arrays plus one JSON ``meta`` string (no pickle), for the cache."""
    c = comparison
    meta: dict = {"layout": COMPARISON_LAYOUT, "states": c.states, "notes": list(c.notes)}
    meta["extra"] = c.extra
    arrays: dict[str, np.ndarray] = {}
    for name, side in (("a", c.a), ("b", c.b)):
        meta[name] = {
            "label": side.label,
            "model": side.model,
            "corpus_name": side.corpus_name,
            "state_names": list(side.state_names),
            "outliers": [list(map(int, o)) for o in side.outliers],
            "top_k": int(side.top_k),
            "top_dims": [list(map(int, t)) for t in side.top_dims],
        }
        for f in _SIDE_ARRAYS:
            arrays[f"{name}_{f}"] = np.asarray(getattr(side, f))
    if c.cka is not None:
        meta["cka"] = {"basis": c.cka.basis, "n": int(c.cka.n), "debiased": bool(c.cka.debiased)}
        meta["cka"]["note"] = c.cka.note
        arrays["cka_matrix"] = np.asarray(c.cka.matrix)
    if c.ln is not None:
        meta["ln"] = {"names": list(c.ln.names)}
        arrays["ln_d_gamma"], arrays["ln_d_beta"] = (
            np.asarray(c.ln.d_gamma),
            np.asarray(c.ln.d_beta),
        )
    for f in _OPTIONAL_ARRAYS:
        if getattr(c, f) is not None:
            arrays[f] = np.asarray(getattr(c, f))
    arrays["meta"] = np.array(json.dumps(meta))
    return arrays


def comparison_from_arrays(arrays: dict[str, np.ndarray]) -> Comparison:
    """The inverse of :func:`comparison_arrays`; raises ValueError for another layout."""
    meta = json.loads(str(arrays["meta"]))
    if meta.get("layout") != COMPARISON_LAYOUT:
        raise ValueError(f"comparison layout {meta.get('layout')!r} != {COMPARISON_LAYOUT}")
    sides = {}
    for name in ("a", "b"):
        m = meta[name]
        sides[name] = SideSummary(
            label=m["label"],
            model=m["model"],
            corpus_name=m["corpus_name"],
            state_names=tuple(m["state_names"]),
            outliers=tuple(tuple(o) for o in m["outliers"]),
            top_k=m["top_k"],
            top_dims=tuple(tuple(t) for t in m["top_dims"]),
            **{f: arrays[f"{name}_{f}"] for f in _SIDE_ARRAYS},
        )
    cka = None
    if meta.get("cka") is not None:
        cka = CKAResult(arrays["cka_matrix"], **meta["cka"])
    ln = None
    if meta.get("ln") is not None:
        ln = LNDifference(meta["ln"]["names"], arrays["ln_d_gamma"], arrays["ln_d_beta"])
    return Comparison(
        a=sides["a"],
        b=sides["b"],
        states=meta["states"],
        cka=cka,
        ln=ln,
        notes=tuple(meta["notes"]),
        extra=meta.get("extra", {}),
        **{f: arrays.get(f) for f in _OPTIONAL_ARRAYS},
    )


def comparison_source(*parts: object) -> dict:
    """What a comparison is computed from (both extractions' cache keys and model fingerprints,
    the pairs' hash, the estimator, the labels) and the layout: the record its key hashes and its
    cache entry carries."""
    return {"kind": "compare", "parts": [str(p) for p in parts], "v": COMPARISON_LAYOUT}


def comparison_key(*parts: object) -> str:
    """The cache key of a comparison: the hash of :func:`comparison_source`."""
    from isoscope.engine.store.entries import entry_key

    return entry_key(comparison_source(*parts))


def cached_compare(cache, computed_from: dict, run) -> Comparison:
    """``run()`` (a :func:`compare` call) through the disk cache ``cache``
    (:class:`isoscope.engine.store.cache.ResultCache`) under the key of ``computed_from``
    (:func:`comparison_source`), which the entry carries: an entry of another key is refused by
    the cache. An unreadable or other-layout entry is a miss; a comparison that cannot be kept
    is still returned."""
    from isoscope.engine.store.entries import entry_key

    key = entry_key(computed_from)
    arrays = cache.load_arrays(key)
    if arrays is not None:
        try:
            return comparison_from_arrays(arrays)
        except (KeyError, TypeError, ValueError):
            pass  # corrupt or older layout: recompute and replace
    comparison = run()
    try:
        arrays = comparison_arrays(comparison)
    except (TypeError, ValueError):
        return comparison  # something not storable without pickle (e.g. an exotic extra)
    cache.save_arrays(key, arrays, computed_from=computed_from)
    return comparison
