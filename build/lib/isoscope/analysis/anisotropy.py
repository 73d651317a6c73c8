"""Isotropy metrics per hidden state: cosine histograms, IsoScore, per-dimension cosine contributions,
self-similarity and intra-text similarity, raw and after any post-processing.

Sources (docs/methods.md section 2):
- Ethayarajh 2019, *How Contextual are Contextualized Word Representations?* (arXiv 1909.00512):
  anisotropy = mean cosine of random token pairs from different texts; self-similarity of a word
  across contexts and intra-sentence similarity, both also "adjusted" by subtracting the anisotropy.
- Timkey & van Schijndel 2021, *All Bark and No Bite: Rogue Dimensions in Transformer Language
  Models Obscure Representational Quality* (arXiv 2109.04404): cos(u, v) = sum_i u_i v_i / (|u||v|),
  so the mean cosine splits exactly into per-dimension contributions.
- Rudman et al. 2022, *IsoScore: Measuring the Uniformity of Embedding Space Utilization*
  (arXiv 2108.07344).

Anisotropy (Ethayarajh 2019; Luo et al. 2021; Godey et al. 2023, arXiv 2306.07656) is the mean
cosine of random pairs of token vectors from different texts: :func:`different_text_pairs` draws
them with a fixed seed (all of them when fewer than asked for exist), and the same pairs serve every
hidden state, so layers are comparable. Every cosine in isoscope comes from :func:`cosine_rows`.

All functions are pure and work in float64. :func:`by_state` runs everything on the token sample of
an :class:`~isoscope.engine.extraction.ExtractionResult` on the pairs of :func:`different_text_pairs`, so raw
and post-processed numbers are computed on identical pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from isoscope.engine.errors import InputError
from isoscope.engine.params import Interval

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from isoscope.engine.extraction import ExtractionResult

HISTOGRAM_BINS = 40  # fixed bins over [-1, 1] for the cosine histograms
N_PAIRS = 10_000  # random different-text token pairs behind every anisotropy number
PAIR_SEED = 0  # their seed
# Timkey & van Schijndel find one to a few dims carrying most of the cosine; five list them all.
TOP_DIMS = Interval(
    0, 4096, 5, integer=True, name="top_dims",
    help="dimensions listed in top_cosine_dims (Timkey's cosine contribution)",
)  # fmt: skip


# ----------------------------------------------------------------------------- cosines


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each row of ``a`` with the same row of ``b`` along the last axis, float64:
    (..., d) x (..., d) -> (...). Zero vectors give 0. The one cosine of isoscope."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    dots = np.einsum("...i,...i->...", a, b)
    denom = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)


def different_text_pairs(
    text_id: np.ndarray, n_pairs: int = N_PAIRS, seed: int = PAIR_SEED
) -> np.ndarray:
    """Index pairs (n, 2) of rows whose ``text_id`` differ; all pairs when there are few enough."""
    text_id = np.asarray(text_id)
    n = len(text_id)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    _, per_text = np.unique(text_id, return_counts=True)
    available = (n * n - int((per_text.astype(np.int64) ** 2).sum())) // 2
    if available == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if available <= n_pairs:
        i, j = np.triu_indices(n, k=1)
        keep = text_id[i] != text_id[j]
        return np.stack([i[keep], j[keep]], axis=1)
    rng = np.random.default_rng(seed)
    found = np.zeros((0, 2), dtype=np.int64)
    while len(found) < n_pairs:
        draw = rng.integers(0, n, size=(2 * (n_pairs - len(found)) + 16, 2))
        draw = draw[text_id[draw[:, 0]] != text_id[draw[:, 1]]]
        found = np.concatenate([found, draw])
    return found[:n_pairs]


PAIR_CHUNK = 512  # pairs per gather: two 512 x d float64 blocks stay in cache


def pair_cosines(vectors: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Cosine similarity of each index pair of rows of ``vectors``, float64 (n_pairs,).

    The rows are gathered in their own dtype and in chunks (:data:`PAIR_CHUNK`), then widened by
    :func:`cosine_rows`: the same numbers as widening everything first, without a float64 copy
    of the whole sample, a cost every anisotropy figure would pay."""
    x = np.asarray(vectors)
    first, second = pairs[:, 0], pairs[:, 1]
    parts = [
        cosine_rows(x[first[i : i + PAIR_CHUNK]], x[second[i : i + PAIR_CHUNK]])
        for i in range(0, len(pairs), PAIR_CHUNK)
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


def mean_pair_cosine(vectors: np.ndarray, pairs: np.ndarray) -> float:
    """Mean cosine over ``pairs`` (the anisotropy when they are different-text pairs); NaN if none."""
    if len(pairs) == 0:
        return float("nan")
    return float(pair_cosines(vectors, pairs).mean())


def anisotropy(
    vectors: np.ndarray, text_id: np.ndarray, n_pairs: int = N_PAIRS, seed: int = PAIR_SEED
) -> float:
    """Mean cosine of random different-text pairs of rows of ``vectors`` (tokens x dims)."""
    return mean_pair_cosine(vectors, different_text_pairs(text_id, n_pairs, seed))


def why_no_anisotropy(result: ExtractionResult) -> str | None:
    """Why ``result`` has no anisotropy (its token sample holds no pair of tokens from different
    texts, so the mean cosine of such pairs is undefined), in one line saying what to do; None
    when it has one."""
    texts_sampled = len(np.unique(result.tokens.text_id[result.sample_index]))
    if texts_sampled >= 2:
        return None
    if result.num_texts < 2:
        return (
            "anisotropy is blank: it is the mean cosine of token pairs from different texts, and "
            f"this corpus has {result.num_texts} text; give at least two texts (one per line)"
        )
    return (
        "anisotropy is blank: it is the mean cosine of token pairs from different texts, and the "
        "token sample holds tokens of one text only; raise the token sample"
    )


def anisotropy_by_state(
    result: ExtractionResult, n_pairs: int = N_PAIRS, seed: int = PAIR_SEED
) -> np.ndarray:
    """Anisotropy of every hidden state of an ExtractionResult, on its token sample (S,)."""
    pairs = different_text_pairs(result.tokens.text_id[result.sample_index], n_pairs, seed)
    return np.array(
        [mean_pair_cosine(result.sample_vectors[s], pairs) for s in range(result.num_states)]
    )


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float64); zero rows stay zero (their cosines count as 0)."""
    x = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def cosine_histogram(
    cosines: np.ndarray, bins: int = HISTOGRAM_BINS
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of ``cosines`` in ``bins`` equal bins with fixed edges over [-1, 1].

    Fixed edges make histograms of different layers and post-processings directly comparable.
    Returns ``(edges (bins + 1,), counts (bins,) int64)``; 1.0 falls in the last bin.
    """
    if bins < 1:
        raise InputError(f"a histogram needs at least 1 bin, got {bins}")
    edges = np.linspace(-1.0, 1.0, bins + 1)
    values = np.clip(
        np.asarray(cosines, dtype=np.float64), -1.0, 1.0
    )  # rounding can exceed 1 by 1e-16
    counts, _ = np.histogram(values, bins=edges)
    return edges, counts.astype(np.int64)


def cosine_contributions(
    vectors: np.ndarray, pairs: np.ndarray, unit: np.ndarray | None = None
) -> np.ndarray:
    """Per-pair, per-dimension terms u_i v_i / (|u||v|), shape (n_pairs, d) (Timkey & van Schijndel).

    Each row sums to that pair's cosine; the column means are the expected contribution of each
    dimension to the mean cosine (the anisotropy). ``unit`` (= :func:`unit_rows` of ``vectors``)
    skips recomputing it.
    """
    unit = unit_rows(vectors) if unit is None else unit
    return unit[pairs[:, 0]] * unit[pairs[:, 1]]


def pair_terms(unit: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's cosine and the mean of :func:`cosine_contributions` over the pairs, ``(n_pairs,)``
    and ``(d,)``, without holding all the (n_pairs, d) terms at once: :data:`PAIR_CHUNK` pairs at a
    time, so the (n_pairs, d) float64 terms are never all in memory."""
    cosines = np.empty(len(pairs))
    total = np.zeros(unit.shape[1])
    for i in range(0, len(pairs), PAIR_CHUNK):
        terms = cosine_contributions(unit, pairs[i : i + PAIR_CHUNK], unit)  # Timkey's terms
        cosines[i : i + len(terms)] = terms.sum(axis=1)  # each pair's terms sum to its cosine
        total += terms.sum(axis=0)
    return cosines, total / max(len(pairs), 1)


def top_cosine_dims(contributions: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
    """The ``k`` dims with the largest expected cosine contribution and their share of the mean cosine.

    ``contributions`` is the (d,) mean contribution per dimension (summing to the anisotropy); a
    share is contribution / anisotropy, so the shares of all dims sum to 1 (a dim can exceed 1 when
    others contribute negatively). When the mean cosine is 0 the shares are undefined (NaN).
    """
    c = np.asarray(contributions, dtype=np.float64)
    total = c.sum()
    order = np.argsort(-c, kind="stable")[: max(int(k), 0)]
    if abs(total) < 1e-12:
        return [(int(j), float("nan")) for j in order]
    return [(int(j), float(c[j] / total)) for j in order]


# ----------------------------------------------------------------------------- IsoScore


def isoscore(vectors: np.ndarray) -> float:
    """IsoScore of a point cloud (points x dims), in [0, 1] (Rudman et al. 2022, arXiv 2108.07344).

    With n dims and lambda the eigenvalues of the covariance (the variances along the principal
    components): lambda_hat = sqrt(n) * lambda / |lambda|; defect delta = |lambda_hat - 1| /
    sqrt(2 (n - sqrt n)); k = (n - delta^2 (n - sqrt n))^2 / n; score = (k - 1) / (n - 1).
    1 when every direction has the same variance, 0 when all variance lies on one line. It is
    invariant to shifting the mean (mean cosine is not). Needs at least n points.

    No eigendecomposition is needed: sum(lambda) = trace(C) and |lambda| = ||C||_F for the
    symmetric covariance C, so |lambda_hat - 1|^2 = 2n - 2 sqrt(n) trace(C) / ||C||_F exactly
    (an eigvalsh per state would dominate the Anisotropy page's time on a deep decoder).
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise InputError(f"IsoScore needs a 2-D array (points x dims), got shape {x.shape}")
    points, n = x.shape
    if n < 2:
        raise InputError(f"IsoScore needs at least 2 dimensions, got {n}")
    if points < n:
        raise InputError(
            f"IsoScore needs at least as many points as dimensions: {points} points in {n} dimensions; "
            "use a larger token sample"
        )
    centered = x - x.mean(axis=0)
    covariance = centered.T @ centered / max(points - 1, 1)
    norm = np.linalg.norm(covariance)  # Frobenius = |eigenvalues|
    if norm == 0:
        return float("nan")  # every point identical: no spread to judge
    defect_sq = max(2.0 * n - 2.0 * np.sqrt(n) * np.trace(covariance) / norm, 0.0)
    defect_sq /= 2.0 * (n - np.sqrt(n))
    k = (n - defect_sq * (n - np.sqrt(n))) ** 2 / n
    return float(np.clip((k - 1.0) / (n - 1.0), 0.0, 1.0))


# ----------------------------------------------------------------------------- word/text similarity


def _word_key(token: str) -> str:
    return str(token).removeprefix("##").lstrip("Ġ▁")


@dataclass(frozen=True)
class RecurringWords:
    """Occurrence pairs of recurring whole words, from different texts (for self-similarity).

    ``pairs`` (m, 2) index sample rows; ``word`` (m,) says which entry of ``words`` a pair belongs to.
    """

    words: tuple[str, ...]
    pairs: np.ndarray
    word: np.ndarray


def recurring_words(tokens, max_occurrences: int = 32, seed: int = 0) -> RecurringWords:
    """Whole-word tokens of a :class:`~isoscope.engine.extraction.TokenTable` that occur in >= 2 different texts.

    Rule: a token counts as a whole word when it is not special, not punctuation, not a "##"
    continuation, and its word is a single token (no other token of the same text has its
    ``word_id``). Words are keyed by the token string without the "Ġ"/"▁" space marker. At most
    ``max_occurrences`` occurrences per word (seeded choice) keep very frequent words from dominating
    the cost; every pair of occurrences from different texts is used.
    """
    text_id = np.asarray(tokens.text_id)
    word_id = np.asarray(tokens.word_id)
    # a word is a single token when its (text, word_id) appears exactly once
    key = text_id.astype(np.int64) * (int(word_id.max(initial=0)) + 2) + (
        word_id.astype(np.int64) + 1
    )
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    single = counts[inverse] == 1
    whole = (
        single
        & (word_id >= 0)
        & ~np.asarray(tokens.is_special)
        & ~np.asarray(tokens.is_punct)
        & ~np.char.startswith(np.asarray(tokens.token, dtype=str), "##")
    )
    rows = np.flatnonzero(whole)
    keys = np.array([_word_key(t) for t in np.asarray(tokens.token)[rows]], dtype=object)
    rng = np.random.default_rng(seed)
    words: list[str] = []
    pair_chunks: list[np.ndarray] = []
    word_chunks: list[np.ndarray] = []
    order = np.argsort(keys, kind="stable") if len(keys) else np.zeros(0, dtype=np.int64)
    sorted_keys = keys[order]
    boundaries = (
        np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
        if len(keys)
        else np.zeros(0, dtype=np.int64)
    )
    for group in np.split(order, boundaries) if len(keys) else []:
        occ = rows[group]
        if len(np.unique(text_id[occ])) < 2:
            continue
        if len(occ) > max_occurrences:
            occ = np.sort(rng.choice(occ, size=max_occurrences, replace=False))
        i, j = np.triu_indices(len(occ), k=1)
        keep = text_id[occ[i]] != text_id[occ[j]]
        if not keep.any():
            continue
        pair_chunks.append(np.stack([occ[i[keep]], occ[j[keep]]], axis=1))
        word_chunks.append(np.full(int(keep.sum()), len(words)))
        words.append(str(keys[group[0]]))
    if not words:
        return RecurringWords((), np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64))
    return RecurringWords(
        tuple(words),
        np.concatenate(pair_chunks).astype(np.int64),
        np.concatenate(word_chunks).astype(np.int64),
    )


def self_similarity(unit: np.ndarray, recurring: RecurringWords) -> float:
    """Mean over recurring words of the mean cosine between the word's occurrences in different texts.

    ``unit`` are unit-length sample vectors (:func:`unit_rows`). Ethayarajh 2019 (arXiv 1909.00512).
    NaN when no word recurs.
    """
    if len(recurring.words) == 0:
        return float("nan")
    # rows are unit length: each pair's Timkey terms sum to its cosine (no norms to recompute)
    cos = cosine_contributions(unit, recurring.pairs, unit).sum(axis=1)
    per_word = np.bincount(recurring.word, weights=cos) / np.bincount(recurring.word)
    return float(per_word.mean())


def intra_text_similarity(unit: np.ndarray, text_id: np.ndarray) -> float:
    """Mean over texts of the mean cosine between each token and its text's mean vector.

    Ethayarajh 2019's intra-sentence similarity (the text's mean is taken over the unit-length token
    vectors given, i.e. the sampled tokens of that text). Texts with fewer than 2 tokens are skipped;
    NaN when none is left.
    """
    text_id = np.asarray(text_id)
    ids, inverse, counts = np.unique(text_id, return_inverse=True, return_counts=True)
    sums = np.zeros((len(ids), unit.shape[1]))
    np.add.at(sums, inverse, unit)
    centroid = unit_rows(sums)  # the direction of the mean equals the direction of the sum
    per_token = cosine_rows(unit, centroid[inverse])
    per_text = np.bincount(inverse, weights=per_token) / counts
    keep = counts >= 2
    return float(per_text[keep].mean()) if keep.any() else float("nan")


# ----------------------------------------------------------------------------- all states


@dataclass(frozen=True)
class StateIsotropy:
    """Isotropy metrics of every hidden state (index 0 = "emb"), for one post-processing.

    Arrays have one entry per hidden state (S,); ``histogram_counts`` is (S, bins) over
    ``histogram_edges`` (bins + 1,); ``contributions`` (S, d_out) are Timkey's expected per-dimension
    contributions (each row sums to ``anisotropy``); ``top_dims`` lists (dim, share) per state.
    """

    state_names: tuple[str, ...]
    postprocessing: str
    anisotropy: np.ndarray
    isoscore: np.ndarray
    self_similarity: np.ndarray
    intra_similarity: np.ndarray
    histogram_edges: np.ndarray
    histogram_counts: np.ndarray
    contributions: np.ndarray
    top_dims: tuple[tuple[tuple[int, float], ...], ...]
    n_pairs: int
    n_recurring_words: int

    @property
    def self_similarity_adjusted(self) -> np.ndarray:
        return self.self_similarity - self.anisotropy

    @property
    def intra_similarity_adjusted(self) -> np.ndarray:
        return self.intra_similarity - self.anisotropy

    def to_frame(self):
        """One row per hidden state with every scalar metric (pandas DataFrame)."""
        import pandas as pd  # lazy: a slow import that only the table views need

        return pd.DataFrame(
            {
                "state": list(self.state_names),
                "postprocessing": self.postprocessing,
                "anisotropy": self.anisotropy,
                "isoscore": self.isoscore,
                "self_similarity": self.self_similarity,
                "self_similarity_adjusted": self.self_similarity_adjusted,
                "intra_similarity": self.intra_similarity,
                "intra_similarity_adjusted": self.intra_similarity_adjusted,
            }
        )


Postprocessor = object | Callable[[int], object] | None


def _estimator_for(postprocessor: Postprocessor, state: int):
    if postprocessor is None:
        return None
    if hasattr(postprocessor, "fit") and hasattr(postprocessor, "transform"):
        # scikit-learn (with scipy) takes seconds to import: only when an estimator is given, so
        # the CLI, which reads this module's constants at start-up, stays quick
        from sklearn.base import clone

        return clone(postprocessor)
    return cast(Callable[[int], object], postprocessor)(state)  # not an estimator: a factory


def by_state(
    result: ExtractionResult,
    postprocessor: Postprocessor = None,
    *,
    n_pairs: int = N_PAIRS,
    seed: int = PAIR_SEED,
    bins: int = HISTOGRAM_BINS,
    top_k: int = TOP_DIMS.default,
    similarity: bool = True,
    name: str | None = None,
) -> StateIsotropy:
    """All isotropy metrics for every hidden state of an ExtractionResult's token sample.

    ``postprocessor`` is None (raw), an unfitted sklearn-style estimator (cloned and fitted on each
    state's sample, e.g. ``make_postprocessor("standardize")``), or a callable ``state -> estimator``
    for per-state choices (e.g. clipping each state's own outlier dims). The random pairs come from
    :func:`different_text_pairs` with ``n_pairs`` and ``seed``, so the anisotropy here equals
    :func:`anisotropy_by_state` for raw vectors. ``similarity=False``
    skips self-/intra-text similarity (NaN) for speed. IsoScore is NaN when the sample has fewer
    points than dimensions.
    """
    tokens = result.sample_tokens
    text_id = np.asarray(tokens.text_id)
    pairs = different_text_pairs(text_id, n_pairs, seed)
    recurring = recurring_words(tokens, seed=seed) if similarity else None
    S = result.num_states
    aniso, iso, selfsim, intra = (np.full(S, np.nan) for _ in range(4))
    counts, contribs, tops = [], [], []
    edges = np.linspace(-1.0, 1.0, bins + 1)
    for s in range(S):
        vectors = np.asarray(result.sample_vectors[s], dtype=np.float64)
        estimator = _estimator_for(postprocessor, s)
        if estimator is not None:
            vectors = np.asarray(estimator.fit_transform(vectors), dtype=np.float64)
        unit = unit_rows(vectors)
        if len(pairs):
            cosines, mean_terms = pair_terms(unit, pairs)
            aniso[s] = cosines.mean()
            edges, c = cosine_histogram(cosines, bins)
        else:
            mean_terms = np.full(vectors.shape[1], np.nan)
            c = np.zeros(bins, dtype=np.int64)
        counts.append(c)
        contribs.append(mean_terms)
        tops.append(tuple(top_cosine_dims(mean_terms, top_k)) if len(pairs) else ())
        if vectors.shape[0] >= vectors.shape[1] >= 2:
            iso[s] = isoscore(vectors)
        if recurring is not None:  # with similarity
            selfsim[s] = self_similarity(unit, recurring)
            intra[s] = intra_text_similarity(unit, text_id)
    return StateIsotropy(
        state_names=tuple(result.state_names),
        postprocessing=name or _describe(postprocessor),
        anisotropy=aniso,
        isoscore=iso,
        self_similarity=selfsim,
        intra_similarity=intra,
        histogram_edges=edges,
        histogram_counts=np.stack(counts),
        contributions=np.stack(contribs),
        top_dims=tuple(tops),
        n_pairs=len(pairs),
        n_recurring_words=len(recurring.words) if recurring is not None else 0,
    )


def _describe(postprocessor: Postprocessor) -> str:
    if postprocessor is None:
        return "none"
    if hasattr(postprocessor, "get_params"):
        return repr(postprocessor)
    return getattr(postprocessor, "__name__", "custom")


def clipped_anisotropy_by_state(
    result: ExtractionResult, dims_by_state, *, n_pairs: int = N_PAIRS, seed: int = PAIR_SEED
) -> np.ndarray:
    """Anisotropy of every hidden state after zeroing ``dims_by_state[s]`` (Luo et al. 2021), on the
    same pairs as the raw anisotropy. Cheaper than :func:`by_state` when only this number is needed."""
    pairs = different_text_pairs(result.tokens.text_id[result.sample_index], n_pairs, seed)
    out = np.full(result.num_states, np.nan)
    for s in range(result.num_states):
        vectors = np.array(result.sample_vectors[s], dtype=np.float64)
        vectors[:, list(dims_by_state[s])] = 0.0
        out[s] = mean_pair_cosine(vectors, pairs)
    return out
