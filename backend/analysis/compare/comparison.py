"""Compare two extractions: model A vs model B on one corpus, or one model on corpus A vs corpus B.

Sources (METHODS.md section 8 and the sections each per-state figure comes from):

- **Linear CKA** (Kornblith, Norouzi, Lee & Hinton 2019, *Similarity of Neural Network
  Representations Revisited*, arXiv 1905.00414): X (n x d1) and Y (n x d2) with centred columns,
  CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F). Invariant to orthogonal maps and isotropic
  scaling, not to arbitrary linear maps; the widths may differ. The rows of X and Y must be the
  same inputs: the same sampled tokens when both models tokenize the corpus identically, else
  mean-pooled text vectors. The debiased variant replaces both HSIC terms by the unbiased
  estimator of Song et al. 2012 (as in Kornblith et al.'s reference code), which removes the
  upward bias of small n (e.g. a few hundred texts in a few hundred dimensions).
- Per hidden state: anisotropy and IsoScore (Ethayarajh 2019; Rudman et al. 2022, via
  :func:`backend.analysis.geometry.isotropy.by_state`), outlier dims
  (:func:`backend.analysis.geometry.outliers.outlier_dims`) gained and lost, |mean| per dim, and
  the share of the mean cosine carried by the top dims (Timkey & van Schijndel 2021); STS
  Spearman by state (Luo et al. 2021, via :mod:`backend.analysis.geometry.similarity`).
- LayerNorm gamma/beta differences per dim (Kovaleva et al. 2021, BERT Busters), when both
  models have the same norms (a fine-tuned model against its base).

``backend`` never imports streamlit; every function is pure given its inputs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from backend.analysis.geometry.isotropy import N_PAIRS, PAIR_SEED
from backend.engine.errors import InputError

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from backend.engine.extraction import ExtractionResult
    from backend.engine.models import LoadedModel

BASES = ("tokens", "texts")


# ----------------------------------------------------------------------------- linear CKA


def _stack_centred(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Column-centred float64 copies of ``arrays`` side by side in one (n, sum d) array (one
    allocation, ready for a single matrix product), and a view of each block."""
    shapes = [np.shape(a) for a in arrays]
    if any(len(shape) != 2 for shape in shapes):
        raise InputError(f"CKA needs 2-D arrays (inputs x dims), got shapes {shapes}")
    rows = {shape[0] for shape in shapes}
    if len(rows) != 1:
        raise InputError(f"CKA needs the same inputs on both sides; got {sorted(rows)} rows")
    edges = np.concatenate([[0], np.cumsum([shape[1] for shape in shapes])]).astype(int)
    stacked = np.empty((rows.pop(), int(edges[-1])), dtype=np.float64)
    blocks = []
    for a, lo, hi in zip(arrays, edges[:-1], edges[1:], strict=True):
        block = stacked[:, lo:hi]
        block[...] = a
        block -= block.mean(axis=0, keepdims=True)
        blocks.append(block)
    return stacked, blocks


def _debiased_term(
    product: float, rows_x: np.ndarray, rows_y: np.ndarray, total_x: float, total_y: float, n: int
) -> float:
    """Unbiased HSIC numerator (Song et al. 2012) of linear kernels from feature-space terms, as in
    Kornblith et al.'s reference code: ``product`` is ||X^T Y||_F^2 of the centred features,
    ``rows_*`` the squared row norms (the kernels' diagonals), ``total_*`` their sums."""
    return (
        product - n / (n - 2.0) * float(rows_x @ rows_y) + total_x * total_y / ((n - 1) * (n - 2))
    )


def linear_cka(x: np.ndarray, y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA of two representations of the same n inputs, (n, d1) and (n, d2); float64.

    1 for identical representations (or an orthogonal map / isotropic scaling of one another).
    NaN when either side has no variance. ``debiased`` needs n >= 4.
    """
    return float(cka_matrix([x], [y], debiased=debiased)[0, 0])


def cka_matrix(
    xs: Sequence[np.ndarray] | np.ndarray,
    ys: Sequence[np.ndarray] | np.ndarray,
    debiased: bool = False,
) -> np.ndarray:
    """Linear CKA of every representation in ``xs`` against every one in ``ys`` (all with the
    same n rows): float64 (len(xs), len(ys)).

    Every cross term ||X_i^T Y_j||_F^2 comes from one matrix product of the stacked, centred
    features (the cost is n x sum(d1) x sum(d2)); the self terms from one product per state.
    """
    if len(xs) == 0 or len(ys) == 0:
        raise InputError("CKA needs at least one hidden state on each side")
    stacked_x, cx = _stack_centred(xs)
    stacked_y, cy = _stack_centred(ys)
    n = stacked_x.shape[0]
    if stacked_y.shape[0] != n:
        raise InputError(
            f"CKA needs the same inputs on both sides; got {n} and {stacked_y.shape[0]} rows"
        )
    if n < (4 if debiased else 2):
        raise InputError(
            f"CKA needs at least {4 if debiased else 2} inputs (tokens or texts), got {n}"
        )
    cross = stacked_x.T @ stacked_y  # every ||X_i^T Y_j|| from one product: (sum d1, sum d2)
    edges_x = np.concatenate([[0], np.cumsum([c.shape[1] for c in cx])])
    edges_y = np.concatenate([[0], np.cumsum([c.shape[1] for c in cy])])
    self_x = [np.linalg.norm(c.T @ c) ** 2 for c in cx]  # ||X^T X||_F^2
    self_y = [np.linalg.norm(c.T @ c) ** 2 for c in cy]
    rows_x = [np.einsum("ij,ij->i", c, c) for c in cx]
    rows_y = [np.einsum("ij,ij->i", c, c) for c in cy]
    out = np.full((len(cx), len(cy)), np.nan)
    for i in range(len(cx)):
        norm_x = self_x[i]
        if debiased:
            norm_x = _debiased_term(
                norm_x, rows_x[i], rows_x[i], rows_x[i].sum(), rows_x[i].sum(), n
            )
        for j in range(len(cy)):
            block = cross[edges_x[i] : edges_x[i + 1], edges_y[j] : edges_y[j + 1]]
            top = float(np.sum(block * block))
            norm_y = self_y[j]
            if debiased:
                top = _debiased_term(top, rows_x[i], rows_y[j], rows_x[i].sum(), rows_y[j].sum(), n)
                norm_y = _debiased_term(
                    norm_y, rows_y[j], rows_y[j], rows_y[j].sum(), rows_y[j].sum(), n
                )
            denom = np.sqrt(max(norm_x, 0.0)) * np.sqrt(max(norm_y, 0.0))
            if denom > 1e-300 * max(1.0, abs(top)):
                out[i, j] = top / denom
    return out


def same_tokens(result_a: ExtractionResult, result_b: ExtractionResult) -> bool:
    """True when both token samples are the same tokens of the same texts (text, position and token
    string row by row), so CKA can pair their sample vectors directly."""
    if result_a.corpus_sha != result_b.corpus_sha:
        return False
    ta, tb = result_a.sample_tokens, result_b.sample_tokens
    return (
        len(ta) == len(tb)
        and np.array_equal(ta.text_id, tb.text_id)
        and np.array_equal(ta.position, tb.position)
        and np.array_equal(ta.token, tb.token)
    )


@dataclass(frozen=True)
class CKAResult:
    """CKA of every hidden state of A (rows) against every hidden state of B (columns).

    ``basis`` is "tokens" (the same sampled tokens in both extractions) or "texts" (mean-pooled
    text vectors, used when the tokenizations differ); ``n`` is the number of paired inputs.
    """

    matrix: np.ndarray
    basis: str
    n: int
    debiased: bool
    note: str = ""

    @property
    def diagonal(self) -> np.ndarray:
        k = min(self.matrix.shape)
        return np.array([self.matrix[i, i] for i in range(k)])


def representation_similarity(
    loaded_a: LoadedModel | None,
    result_a: ExtractionResult,
    loaded_b: LoadedModel | None,
    result_b: ExtractionResult,
    *,
    debiased: bool | None = None,
    progress=None,
) -> CKAResult:
    """Linear CKA, states of A x states of B, on the same tokens when possible, else on texts.

    Tokens: when :func:`same_tokens` holds (same corpus, same tokenization, same settings, hence
    the same seeded token sample), the sample vectors are paired row by row. Texts: otherwise,
    mean-pooled vectors of every text (:func:`backend.engine.extraction.mean_pooled`), which needs both
    loaded models. ``debiased=None`` (auto) uses the debiased estimator on the text basis, where n
    is small. Raises :class:`InputError` when the two extractions are of different corpora (CKA
    compares representations of the same inputs).
    """
    if result_a.corpus_sha != result_b.corpus_sha:
        raise InputError(
            "CKA compares two representations of the same inputs, but these extractions are of "
            "different corpora; compare two models on one corpus"
        )
    if same_tokens(result_a, result_b):
        use_debiased = bool(debiased) if debiased is not None else False
        matrix = cka_matrix(
            list(result_a.sample_vectors), list(result_b.sample_vectors), debiased=use_debiased
        )
        return CKAResult(matrix, "tokens", len(result_a.sample_index), use_debiased)
    if loaded_a is None or loaded_b is None:
        raise InputError(
            "the two models tokenize the corpus differently, so CKA needs mean-pooled text "
            "vectors: pass both loaded models"
        )
    from backend.engine.extraction import mean_pooled

    max_length = result_a.settings.max_length
    batch = result_a.settings.batch_size
    pooled_a = mean_pooled(loaded_a, result_a.texts, max_length, batch, progress)
    pooled_b = mean_pooled(loaded_b, result_b.texts, max_length, batch, progress)
    use_debiased = True if debiased is None else bool(debiased)
    matrix = cka_matrix(list(pooled_a), list(pooled_b), debiased=use_debiased)
    return CKAResult(
        matrix,
        "texts",
        pooled_a.shape[1],
        use_debiased,
        note="the two models tokenize the corpus differently, so CKA uses mean-pooled text "
        "vectors (one per text) instead of token vectors",
    )


# ----------------------------------------------------------------------------- per-state figures


@dataclass(frozen=True)
class SideSummary:
    """Per-state figures of one extraction (one side of a comparison), all (S,) or per state.

    ``top_share`` is the share of the mean cosine carried by the ``top_k`` dims with the largest
    contribution (Timkey & van Schijndel), ``top_dims`` those dims.
    """

    label: str
    model: dict
    corpus_name: str
    state_names: tuple[str, ...]
    anisotropy: np.ndarray
    isoscore: np.ndarray
    outliers: tuple[tuple[int, ...], ...]
    mean: np.ndarray
    top_k: int
    top_share: np.ndarray
    top_dims: tuple[tuple[int, ...], ...]

    @property
    def num_states(self) -> int:
        return len(self.state_names)

    @property
    def hidden_size(self) -> int:
        return int(self.mean.shape[1])


def summarize(
    result: ExtractionResult,
    label: str = "",
    *,
    n_pairs: int = N_PAIRS,
    seed: int = PAIR_SEED,
    top_k: int = 3,
) -> SideSummary:
    """Anisotropy, IsoScore, Timkey's top-dim share (:func:`backend.analysis.geometry.isotropy.by_state`) and the
    headline outlier dims (:func:`backend.analysis.geometry.outliers.outlier_dims`) of every hidden state."""
    from backend.analysis.geometry.isotropy import by_state
    from backend.analysis.geometry.outliers import outlier_dims

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
        outliers=tuple(
            tuple(int(j) for j in outlier_dims(result, s)) for s in range(result.num_states)
        ),
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
    (Luo et al. 2021, Table 2; raw vectors), via :mod:`backend.analysis.geometry.similarity`."""
    from backend.analysis.geometry.similarity import pool_pairs, sts_by_state

    first, second = pool_pairs(loaded, pairs, max_length=max_length)
    rows = sts_by_state(first, second, pairs.scores, [[] for _ in range(first.shape[0])])
    return np.array([row["raw"] for row in rows], dtype=np.float64)


# ----------------------------------------------------------------------------- LayerNorm


@dataclass(frozen=True)
class LNDifference:
    """gamma_B - gamma_A and beta_B - beta_A per (norm, dim): float64 (n_norms, d)."""

    names: list[str]
    d_gamma: np.ndarray
    d_beta: np.ndarray

    def moved_dims(self, top: int = 10) -> list[tuple[int, float]]:
        """The ``top`` dims whose gamma or beta moved most (largest |difference| over the norms)."""
        moved = np.maximum(np.abs(self.d_gamma).max(axis=0), np.abs(self.d_beta).max(axis=0))
        order = np.argsort(-moved, kind="stable")[:top]
        return [(int(j), float(moved[j])) for j in order]

    def to_frame(self):
        import pandas as pd

        n, d = self.d_gamma.shape
        return pd.DataFrame(
            {
                "norm": np.repeat(self.names, d),
                "dim": np.tile(np.arange(d), n),
                "d_gamma": self.d_gamma.ravel(),
                "d_beta": self.d_beta.ravel(),
            }
        )


def layernorm_difference(
    loaded_a: LoadedModel, loaded_b: LoadedModel
) -> tuple[LNDifference | None, str]:
    """LayerNorm gamma/beta differences (B - A) when both models have the same norms (names and
    width); else ``(None, reason)``. Kovaleva et al. 2021 trace which dims move in fine-tuning."""
    from backend.analysis.layernorm.params import ln_params, norms_of
    from backend.engine.errors import IsoscopeError

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


@dataclass(frozen=True)
class Comparison:
    """Everything the Compare page and ``python -m backend compare`` show for A vs B."""

    a: SideSummary
    b: SideSummary
    states: list[dict]
    cka: CKAResult | None
    abs_mean_diff: np.ndarray | None
    ln: LNDifference | None
    notes: tuple[str, ...] = ()
    sts_a: np.ndarray | None = None
    sts_b: np.ndarray | None = None
    extra: dict = field(default_factory=dict)


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
) -> Comparison:
    """Compare two extractions (see the module docstring for what and why).

    CKA runs when both are of the same corpus (two models); for one model on two corpora it is
    skipped (None) with a note, since CKA needs the same inputs. LayerNorm differences need both
    loaded models with the same norms; STS needs ``pairs`` (:class:`backend.analysis.geometry.similarity.SentencePairs`)
    and both loaded models.
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
        cka = representation_similarity(loaded_a, result_a, loaded_b, result_b, debiased=debiased)
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


# ----------------------------------------------------------------------------- disk cache

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


def comparison_key(*parts: object) -> str:
    """The cache key of a comparison: a hash of what determines it (both extractions' cache keys
    and model fingerprints, the pairs' hash, the estimator, the labels) and the layout."""
    payload = json.dumps(
        {"kind": "compare", "parts": [str(p) for p in parts], "v": COMPARISON_LAYOUT},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def comparison_cache_key(result_a: ExtractionResult, result_b: ExtractionResult, **options) -> str:
    """The disk-cache key of ``compare(result_a, result_b, **options)``: both extractions' cache
    keys, both models' fingerprints, the pairs' hash and every other option of :func:`compare`
    with its default filled in."""
    import inspect

    from backend.engine.cache import cache_key

    bound = inspect.signature(compare).bind(result_a, result_b, **options)
    bound.apply_defaults()
    args = dict(bound.arguments)
    loaded = [args.pop(name) for name in ("loaded_a", "loaded_b")]
    pairs = args.pop("pairs")
    results = [args.pop("result_a"), args.pop("result_b")]
    return comparison_key(
        *(cache_key(r.model_fingerprint, r.corpus_sha, r.settings) for r in results),
        *(m.fingerprint if m is not None else None for m in loaded),
        pairs.sha if pairs is not None else None,
        json.dumps(args, sort_keys=True, default=str),
    )


def compare_with_cache(
    cache, result_a: ExtractionResult, result_b: ExtractionResult, **options
) -> Comparison:
    """``compare(result_a, result_b, **options)`` through the disk cache ``cache`` (a
    :class:`backend.engine.cache.ResultCache`; None: computed, not kept). The Compare page and the
    ``compare`` command both go through it, so either reopens what the other computed."""

    def run() -> Comparison:
        return compare(result_a, result_b, **options)

    if cache is None:
        return run()
    return cached_compare(cache, comparison_cache_key(result_a, result_b, **options), run)


def cached_compare(cache, key: str, run) -> Comparison:
    """``run()`` (a :func:`compare` call) through the disk cache ``cache``
    (:class:`backend.engine.cache.ResultCache`) under ``key`` (:func:`comparison_key`). An unreadable or
    other-layout entry is a miss; a comparison that cannot be kept is still returned."""
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
    cache.save_arrays(key, arrays)
    return comparison
