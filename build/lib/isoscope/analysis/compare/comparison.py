"""Compare two extractions: model A vs model B on one corpus, or one model on corpus A vs corpus B.

Sources (docs/methods.md section 8 and the sections each per-state figure comes from):

- **Linear CKA** (Kornblith, Norouzi, Lee & Hinton 2019, *Similarity of Neural Network
  Representations Revisited*, arXiv 1905.00414): X (n x d1) and Y (n x d2) with centred columns,
  CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F). Invariant to orthogonal maps and isotropic
  scaling, not to arbitrary linear maps; the widths may differ. The rows of X and Y must be the
  same inputs: the same sampled tokens when both models tokenize the corpus identically, else
  mean-pooled text vectors. The debiased variant replaces both HSIC terms by the unbiased
  estimator of Song et al. 2012 (as in Kornblith et al.'s reference code), which removes the
  upward bias of small n (e.g. a few hundred texts in a few hundred dimensions).
- Per hidden state: anisotropy and IsoScore (Ethayarajh 2019; Rudman et al. 2022, via
  :func:`isoscope.analysis.anisotropy.by_state`), outlier dims
  (:func:`isoscope.analysis.outliers.outlier_dims`) gained and lost, |mean| per dim, and
  the share of the mean cosine carried by the top dims (Timkey & van Schijndel 2021); STS
  Spearman by state (Luo et al. 2021, via :mod:`isoscope.analysis.similarity`).
- LayerNorm gamma/beta differences per dim (Kovaleva et al. 2021, BERT Busters), when both
  models have the same norms (a fine-tuned model against its base).

``backend`` never imports streamlit; every function is pure given its inputs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from isoscope.analysis.anisotropy import N_PAIRS, PAIR_SEED
from isoscope.analysis.compare.cka import (
    BASES,
    CKAResult,
    cka_matrix,
    linear_cka,
    representation_similarity,
    same_tokens,
)
from isoscope.analysis.compare.records import Comparison, LNDifference, SideSummary
from isoscope.analysis.compare.storage import (
    COMPARISON_LAYOUT,
    cached_compare,
    comparison_arrays,
    comparison_from_arrays,
    comparison_key,
    comparison_source,
)
from isoscope.engine.errors import InputError

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from isoscope.engine.extraction import ExtractionResult
    from isoscope.engine.load.models import LoadedModel

__all__ = [
    "BASES",
    "COMPARISON_LAYOUT",
    "CKAResult",
    "Comparison",
    "LNDifference",
    "SideSummary",
    "abs_mean_difference",
    "cached_compare",
    "cka_matrix",
    "compare",
    "compare_with_cache",
    "comparison_arrays",
    "comparison_cache_key",
    "comparison_cache_source",
    "comparison_from_arrays",
    "comparison_key",
    "comparison_source",
    "comparison_report",
    "dims_comparable",
    "layernorm_difference",
    "linear_cka",
    "representation_similarity",
    "same_tokens",
    "state_rows",
    "sts_by_state_for",
    "summarize",
]


# ----------------------------------------------------------------------------- per-state figures


def summarize(
    result: ExtractionResult,
    label: str = "",
    *,
    n_pairs: int = N_PAIRS,
    seed: int = PAIR_SEED,
    top_k: int = 3,
) -> SideSummary:
    """Anisotropy, IsoScore, Timkey's top-dim share (:func:`isoscope.analysis.anisotropy.by_state`) and the
    headline outlier dims (:func:`isoscope.analysis.outliers.outlier_dims`) of every hidden state."""
    from isoscope.analysis.anisotropy import by_state
    from isoscope.analysis.outliers import outlier_dims_by_state

    iso = by_state(result, n_pairs=n_pairs, seed=seed, top_k=top_k, similarity=False)
    shares = np.array(
        [
            float(np.nansum([share for _, share in tops])) if tops else np.nan
            for tops in iso.top_dims
        ]
    )
    return SideSummary(
        label=label or result.model.get("display_name", "model"),
        model=dict(result.model),
        corpus_name=result.corpus_name,
        state_names=tuple(result.state_names),
        anisotropy=np.asarray(iso.anisotropy, dtype=np.float64),
        isoscore=np.asarray(iso.isoscore, dtype=np.float64),
        outliers=tuple(tuple(dims) for dims in outlier_dims_by_state(result)),
        mean=np.asarray(result.mean, dtype=np.float64),
        top_k=int(top_k),
        top_share=shares,
        top_dims=tuple(tuple(int(j) for j, _ in tops) for tops in iso.top_dims),
    )


def dims_comparable(a: SideSummary, b: SideSummary) -> bool:
    """Dimension j means the same coordinate on both sides only when the widths are equal."""
    return a.hidden_size == b.hidden_size


def state_rows(a: SideSummary, b: SideSummary) -> list[dict]:
    """One row per hidden state both sides have (index 0 = emb): anisotropy, IsoScore, outlier
    dims, the dims gained (outliers of B only) and lost (outliers of A only), and the top-dim
    share of the mean cosine. ``gained``/``lost`` are None when the widths differ."""
    comparable = dims_comparable(a, b)
    rows = []
    for s in range(min(a.num_states, b.num_states)):
        oa, ob = set(a.outliers[s]), set(b.outliers[s])
        rows.append(
            {
                "index": s,
                "name": a.state_names[s],
                "anisotropy_a": float(a.anisotropy[s]),
                "anisotropy_b": float(b.anisotropy[s]),
                "isoscore_a": float(a.isoscore[s]),
                "isoscore_b": float(b.isoscore[s]),
                "outliers_a": list(a.outliers[s]),
                "outliers_b": list(b.outliers[s]),
                "gained": sorted(ob - oa) if comparable else None,
                "lost": sorted(oa - ob) if comparable else None,
                "top_share_a": float(a.top_share[s]),
                "top_share_b": float(b.top_share[s]),
                "top_dims_a": list(a.top_dims[s]),
                "top_dims_b": list(b.top_dims[s]),
            }
        )
    return rows


def abs_mean_difference(a: SideSummary, b: SideSummary) -> np.ndarray | None:
    """|mean_B| - |mean_A| per (hidden state, dim) for the states both have: float64
    (min(S_a, S_b), d); None when the widths differ (dims do not correspond)."""
    if not dims_comparable(a, b):
        return None
    k = min(a.num_states, b.num_states)
    return np.abs(b.mean[:k]) - np.abs(a.mean[:k])


# ----------------------------------------------------------------------------- STS by state


def sts_by_state_for(loaded: LoadedModel, pairs, max_length: int = 128) -> np.ndarray:
    """Spearman x 100 of mean-pooled cosines against the gold scores, per hidden state (S,)
    (Luo et al. 2021, Table 2; raw vectors), via :mod:`isoscope.analysis.similarity`."""
    from isoscope.analysis.similarity import pool_pairs, sts_by_state

    first, second = pool_pairs(loaded, pairs, max_length=max_length)
    rows = sts_by_state(first, second, pairs.scores, [[] for _ in range(first.shape[0])])
    return np.array([row["raw"] for row in rows], dtype=np.float64)


# ----------------------------------------------------------------------------- LayerNorm


def layernorm_difference(
    loaded_a: LoadedModel, loaded_b: LoadedModel
) -> tuple[LNDifference | None, str]:
    """LayerNorm gamma/beta differences (B - A) when both models have the same norms (names and
    width); else ``(None, reason)``. Kovaleva et al. 2021 trace which dims move in fine-tuning."""
    from isoscope.analysis.layernorm.params import ln_params, norms_of
    from isoscope.engine.errors import IsoscopeError

    if loaded_a.info.hidden_size != loaded_b.info.hidden_size:
        return None, (
            f"the widths differ ({loaded_a.info.hidden_size} vs {loaded_b.info.hidden_size}), so "
            "LayerNorm parameters cannot be compared dim by dim"
        )
    try:
        sites_a = [s for s in norms_of(loaded_a) if s.role != "head"]
        sites_b = [s for s in norms_of(loaded_b) if s.role != "head"]
    except IsoscopeError as exc:
        return None, str(exc)
    names_a, names_b = [s.name for s in sites_a], [s.name for s in sites_b]
    if names_a != names_b:
        return None, (
            "the architectures differ (LayerNorms "
            f"{', '.join(names_a[:3])}… vs {', '.join(names_b[:3])}…), so their parameters "
            "do not correspond"
        )
    pa, pb = ln_params(sites_a), ln_params(sites_b)
    return LNDifference(names_a, pb.gamma - pa.gamma, pb.beta - pa.beta), ""


# ----------------------------------------------------------------------------- the whole comparison


def compare(
    result_a: ExtractionResult,
    result_b: ExtractionResult,
    *,
    loaded_a: LoadedModel | None = None,
    loaded_b: LoadedModel | None = None,
    pairs=None,
    debiased: bool | None = None,
    n_pairs: int = N_PAIRS,
    seed: int = PAIR_SEED,
    top_k: int = 3,
    label_a: str = "A",
    label_b: str = "B",
    inputs=None,
) -> Comparison:
    """Compare two extractions (see the module docstring for what and why).

    CKA runs when both are of the same corpus (two models); for one model on two corpora it is
    skipped (None) with a note, since CKA needs the same inputs. LayerNorm differences need both
    loaded models with the same norms; STS needs ``pairs`` (a ``SentencePairs``)
    and both loaded models, and text (image and audio analyses have no sentence pairs).
    ``inputs``: the corpus's items, which CKA pools when the two models tokenize them differently
    (needed for images and audio, whose results name their items by path only).
    """
    a = summarize(result_a, label_a, n_pairs=n_pairs, seed=seed, top_k=top_k)
    b = (
        replace(a, label=label_b)
        if result_b is result_a
        else summarize(result_b, label_b, n_pairs=n_pairs, seed=seed, top_k=top_k)
    )
    notes: list[str] = []
    cka = None
    if result_a.corpus_sha == result_b.corpus_sha:
        cka = representation_similarity(
            loaded_a, result_a, loaded_b, result_b, debiased=debiased, inputs=inputs
        )
        if cka.note:
            notes.append(cka.note)
    else:
        notes.append(
            "CKA is skipped: it compares two representations of the same inputs, and the two "
            "corpora differ"
        )
    if not dims_comparable(a, b):
        notes.append(
            f"the widths differ ({a.hidden_size} vs {b.hidden_size}): dims do not correspond, so "
            "gained/lost outliers and the |mean| difference are not shown"
        )
    if a.num_states != b.num_states:
        notes.append(
            f"the depths differ ({a.num_states - 1} vs {b.num_states - 1} layers): per-state rows "
            f"cover the first {min(a.num_states, b.num_states)} hidden states; CKA covers all"
        )
    ln = None
    if loaded_a is not None and loaded_b is not None and loaded_a is not loaded_b:
        ln, reason = layernorm_difference(loaded_a, loaded_b)
        if ln is None and dims_comparable(a, b):  # (different widths are noted above)
            notes.append(f"no LayerNorm comparison: {reason}")
    sts_a = sts_b = None
    if pairs is not None and result_a.input_kind != "text":
        raise InputError(
            "STS by state compares sentence pairs, and this comparison read "
            f"{result_a.input_kind} inputs; leave the pairs out"
        )
    if pairs is not None and loaded_a is not None and loaded_b is not None:
        max_length = result_a.settings.max_length
        sts_a = sts_by_state_for(loaded_a, pairs, max_length)
        sts_b = sts_a if loaded_b is loaded_a else sts_by_state_for(loaded_b, pairs, max_length)
    return Comparison(
        a=a,
        b=b,
        states=state_rows(a, b),
        cka=cka,
        abs_mean_diff=abs_mean_difference(a, b),
        ln=ln,
        notes=tuple(notes),
        sts_a=sts_a,
        sts_b=sts_b,
    )


def comparison_report(comparison: Comparison) -> dict:
    """The ``compare`` JSON: ``a``/``b`` model cards, ``cka`` (states of A x states of B),
    ``basis`` ("tokens" | "texts"), ``states`` (one row per state both have), plus the CKA's n and
    estimator, the LayerNorm dims that moved most, STS by state when pairs were given, and notes."""
    c = comparison
    states = [dict(row) for row in c.states]
    if c.sts_a is not None and c.sts_b is not None:
        for row in states:
            row["sts_a"] = float(c.sts_a[row["index"]])
            row["sts_b"] = float(c.sts_b[row["index"]])
    report = {
        "a": dict(c.a.model),
        "b": dict(c.b.model),
        "cka": c.cka.matrix if c.cka is not None else None,
        "basis": c.cka.basis if c.cka is not None else None,
        "states": states,
        "cka_n": c.cka.n if c.cka is not None else None,
        "cka_debiased": c.cka.debiased if c.cka is not None else None,
        "corpus_a": c.a.corpus_name,
        "corpus_b": c.b.corpus_name,
        "notes": list(c.notes),
    }
    if c.ln is not None:
        report["layernorm_moved_dims"] = [
            {"dim": j, "max_abs_change": v} for j, v in c.ln.moved_dims(10)
        ]
    return report


# ----------------------------------------------------------------------------- through the disk cache


def comparison_cache_source(
    result_a: ExtractionResult, result_b: ExtractionResult, **options
) -> dict:
    """What ``compare(result_a, result_b, **options)`` is computed from, the record its cache key
    hashes (:func:`isoscope.analysis.compare.storage.comparison_source`): both extractions' cache
    keys, both models' fingerprints, the pairs' hash and every other option of :func:`compare`
    with its default filled in."""
    import inspect

    from isoscope.engine.store.entries import cache_key

    bound = inspect.signature(compare).bind(result_a, result_b, **options)
    bound.apply_defaults()
    args = dict(bound.arguments)
    loaded = [args.pop(name) for name in ("loaded_a", "loaded_b")]
    args.pop("inputs")  # the corpus's items: the extractions' corpus hash already names them
    pairs = args.pop("pairs")
    results = [args.pop("result_a"), args.pop("result_b")]
    return comparison_source(
        *(cache_key(r.model_fingerprint, r.corpus_sha, r.settings) for r in results),
        *(m.fingerprint if m is not None else None for m in loaded),
        pairs.sha if pairs is not None else None,
        json.dumps(args, sort_keys=True, default=str),
    )


def comparison_cache_key(result_a: ExtractionResult, result_b: ExtractionResult, **options) -> str:
    """The disk-cache key of ``compare(result_a, result_b, **options)``: the hash of
    :func:`comparison_cache_source`."""
    from isoscope.engine.store.entries import entry_key

    return entry_key(comparison_cache_source(result_a, result_b, **options))


def compare_with_cache(
    cache, result_a: ExtractionResult, result_b: ExtractionResult, **options
) -> Comparison:
    """``compare(result_a, result_b, **options)`` through the disk cache ``cache`` (a
    :class:`isoscope.engine.store.cache.ResultCache`; None: computed, not kept). The Compare page and the
    ``compare`` command both go through it, so either reopens what the other computed."""

    def run() -> Comparison:
        return compare(result_a, result_b, **options)

    if cache is None:
        return run()
    cached = cached_compare(cache, comparison_cache_source(result_a, result_b, **options), run)
    return with_cards(cached, result_a, result_b)


def with_cards(
    comparison: Comparison, result_a: ExtractionResult, result_b: ExtractionResult
) -> Comparison:
    """``comparison`` whose sides carry ``result_a``'s and ``result_b``'s model cards: a comparison
    kept under both extractions' keys may have been computed from other paths with the same
    weights (:mod:`isoscope.engine.store.provenance`); its cards name what was opened now."""
    a = replace(comparison.a, model=dict(result_a.model))
    b = replace(comparison.b, model=dict(result_b.model))
    return replace(comparison, a=a, b=b)
