"""2-D projections of hidden states (token sample or mean-pooled texts), before and after post-processing.

- **PCA** (sklearn): the two directions of largest variance; linear, fast, shows the global shape
  (an outlier dimension or a common direction dominates it).
- **UMAP** (McInnes, Healy & Melville 2018, arXiv 1802.03426; umap-learn): a neighbour graph laid
  out in 2-D; keeps local structure.
- **t-SNE** (van der Maaten & Hinton 2008, JMLR 9; openTSNE with FFT-accelerated gradients,
  Linderman et al. 2019): keeps local neighbourhoods; see :data:`TSNE_SLOW_POINTS` for timings.

UMAP and t-SNE first reduce the vectors to :data:`PRE_PCA_DIMS` (50) dimensions with PCA, the usual
practice (van der Maaten & Hinton recommend it; it removes noise and makes the neighbour search
much cheaper). That step is skipped after whitening, where every direction has unit variance and
PCA would keep an arbitrary subspace. Everything is seeded: the same inputs and seed give the same
coordinates.

UMAP compiles its numba kernels on the first fit in a process (slow enough that a user would wait);
:func:`warm_up_umap` runs a tiny fit that triggers the compilation so it can be done in the
background before a user asks for UMAP.

Post-processing (:mod:`isoscope.analysis.projections.postprocess`) is fitted on the whole token sample of the hidden
state (or on all pooled texts) and applied to the projected points, so "before" and "after" show
the same points.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isoscope.analysis.anisotropy import (
    N_PAIRS,
    PAIR_SEED,
    cosine_contributions,
    different_text_pairs,
    isoscore,
    mean_pair_cosine,
    top_cosine_dims,
)
from isoscope.engine.errors import InputError

METHODS: dict[str, str] = {"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}
PRE_PCA_DIMS = 50
MIN_POINTS = 10
TSNE_SLOW_POINTS = 10_000  # above this t-SNE takes more than a few seconds: the page says so
TSNE_FFT_POINTS = 10_000  # openTSNE: Barnes-Hut below (faster on few points), FFT from here on

# Colour options for the token sample and for mean-pooled texts.
TOKEN_COLOURS: dict[str, str] = {
    "category": "special / punctuation / position 0",
    "position": "position in the text",
    "token": "token (most frequent)",
    "text": "text (largest in the sample)",
    "frequency": "token frequency in the corpus (log10)",
}
TEXT_COLOURS: dict[str, str] = {
    "length": "text length (tokens)",
    "text": "text index",
}
TOP_CATEGORIES = 12  # token / text colourings show this many values, the rest is "other"
# Colour options of image patches and audio frames (tokens that mean something).
IMAGE_COLOURS: dict[str, str] = {
    "image": "image (largest in the sample)",
    "class": "class (sub-folder)",
    "patch_row": "patch row",
    "patch_column": "patch column",
    "special": "special (CLS / distillation / registers) or patch",
}
AUDIO_COLOURS: dict[str, str] = {
    "file": "file (largest in the sample)",
    "time": "time in the clip (s)",
}


def token_colour_options(result) -> dict[str, str]:
    """The token-sample colourings that apply to this result's inputs."""
    return {"image": IMAGE_COLOURS, "audio": AUDIO_COLOURS}.get(result.input_kind, TOKEN_COLOURS)


def media_colouring(result, sample_tokens, by: str) -> Colouring:
    """Colours of sampled patches or frames (``sample_tokens``: rows of ``result.tokens``)."""
    kind = result.input_kind
    options = IMAGE_COLOURS if kind == "image" else AUDIO_COLOURS
    if by not in options:
        raise InputError(f"unknown colouring {by!r}; choose one of: {', '.join(options)}")
    label = options[by]
    index = sample_tokens.word_id.astype(np.float64)  # patch / frame index, -1 for prefix tokens
    index[sample_tokens.word_id < 0] = np.nan
    if by in ("patch_row", "patch_column"):
        cols = (result.model.get("patch_grid") or [1, 1])[1]
        values = index // cols if by == "patch_row" else index % cols
        return Colouring(values, "numeric", label)
    if by == "time":
        fps = result.model.get("frames_per_second") or 1.0
        return Colouring(index / fps, "numeric", label)
    if by == "special":
        values = np.where(sample_tokens.is_special, sample_tokens.token, "patch").astype(object)
        return Colouring(values, "categorical", label, tuple(sorted(set(values.tolist()))))
    if by == "class":
        labels = np.array(result.extra["inputs"]["labels"] or [""], dtype=object)
        names = np.where(labels == "", "(no class)", labels)[sample_tokens.text_id]
        found = _top_or_other(names.astype(str), TOP_CATEGORIES, "other classes")
        return Colouring(found.values, found.kind, label, found.order)
    names = np.array([result.texts[t] for t in sample_tokens.text_id], dtype=str)
    found = _top_or_other(
        names, TOP_CATEGORIES, f"other {'images' if kind == 'image' else 'files'}"
    )
    return Colouring(found.values, found.kind, label, found.order)


@dataclass(frozen=True)
class Projection:
    """2-D coordinates of n points (float64 (n, 2)) and how they were made.

    ``explained_variance_ratio``: for PCA, the share of variance of each axis (2,); for UMAP and
    t-SNE, None. ``pre_pca_variance``: share of the variance kept by the 50-dim PCA run before
    UMAP / t-SNE (None when it was skipped). ``landmarks``: at corpus scale, how many rows
    UMAP / t-SNE was fitted on (the rest placed by kNN among them; None when every point was
    fitted), and ``fit_seconds`` the part of ``seconds`` the landmark fit took.
    """

    coords: np.ndarray
    method: str
    seed: int
    seconds: float
    explained_variance_ratio: np.ndarray | None = None
    pre_pca_variance: float | None = None
    landmarks: int | None = None
    fit_seconds: float | None = None

    @property
    def label(self) -> str:
        return METHODS[self.method]

    @property
    def how(self) -> str:
        """The method as a figure names it, with the landmark fit when there was one."""
        if self.landmarks is None:
            return self.label
        return f"landmark {self.label} ({self.landmarks:,} fitted) + kNN placement of the rest"


def check_method(method: str) -> str:
    key = str(method).strip().lower().replace("-", "")
    if key not in METHODS:
        raise InputError(f"unknown projection {method!r}; choose one of: {', '.join(METHODS)}")
    return key


def projection_sample(total: int, size: int, seed: int = 0) -> np.ndarray:
    """Sorted row indices of a seeded sample of ``size`` of ``total`` rows.

    Samples are nested: a larger size with the same seed contains every row of a smaller one,
    so growing the sample adds points without reshuffling the old ones.
    """
    if total < 1:
        raise InputError("there are no vectors to project")
    size = int(min(max(size, 1), total))
    order = np.random.default_rng(seed).permutation(total)
    return np.sort(order[:size])


def _pca_solver(n: int, d: int, k: int = PRE_PCA_DIMS) -> str:
    """Exact PCA every way (agreeing to 1e-12): with many more points than dims the d x d
    covariance eigendecomposition is much cheaper than an SVD of the data; for the 2-D view of a
    wide sample, ARPACK's few leading vectors (run to machine precision) are cheaper than the
    full SVD (docs/performance.md, "Projections")."""
    if n > 2 * d:
        return "covariance_eigh"
    return "arpack" if k <= 2 < min(n, d) // 10 else "full"


def _pre_pca(x: np.ndarray, seed: int, skip: bool) -> tuple[np.ndarray, float | None]:
    """PCA to PRE_PCA_DIMS dims before UMAP / t-SNE (see module doc); returns (vectors, kept share)."""
    from sklearn.decomposition import PCA

    n, d = x.shape
    k = min(PRE_PCA_DIMS, d, n - 1)
    if skip or d <= PRE_PCA_DIMS or k < 2:
        return x, None
    pca = PCA(n_components=k, random_state=seed, svd_solver=_pca_solver(n, d, k))
    reduced = pca.fit_transform(x)
    return reduced, float(pca.explained_variance_ratio_.sum())


def project(
    vectors: np.ndarray,
    method: str = "pca",
    seed: int = 0,
    *,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    perplexity: float = 30.0,
    pre_pca: bool = True,
) -> Projection:
    """Project ``vectors`` (n, d) to 2-D with PCA, UMAP or t-SNE (see module doc), seeded."""
    method = check_method(method)
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise InputError(f"projection needs a 2-D array (points x dims), got shape {x.shape}")
    n = x.shape[0]
    if n < MIN_POINTS:
        raise InputError(
            f"a projection needs at least {MIN_POINTS} points, got {n}; use a larger sample or corpus"
        )
    if not np.isfinite(x).all():
        raise InputError("the vectors contain NaN or infinite values; cannot project them")
    started = time.perf_counter()
    if method == "pca":
        from sklearn.decomposition import PCA

        pca = PCA(n_components=2, random_state=seed, svd_solver=_pca_solver(n, x.shape[1], 2))
        coords = pca.fit_transform(x)
        return Projection(
            coords,
            method,
            seed,
            time.perf_counter() - started,
            explained_variance_ratio=pca.explained_variance_ratio_.copy(),
        )
    reduced, kept = _pre_pca(x, seed, skip=not pre_pca)
    if method == "umap":
        import umap  # optional heavy import: only when asked for

        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # "n_jobs overridden by random_state": seeded UMAP is single-threaded
            reducer = umap.UMAP(
                n_components=2,
                n_neighbors=int(min(n_neighbors, n - 1)),
                min_dist=min_dist,
                random_state=seed,
                metric="euclidean",
            )
            coords = reducer.fit_transform(reduced)
    else:
        coords = _tsne(reduced, perplexity=float(min(perplexity, (n - 1) / 3.0)), seed=seed)
    return Projection(
        np.asarray(coords, dtype=np.float64),
        method,
        seed,
        time.perf_counter() - started,
        pre_pca_variance=kept,
    )


def _tsne(x: np.ndarray, *, perplexity: float, seed: int) -> np.ndarray:
    """openTSNE (Poličar et al. 2024, JSS 109): exact-perplexity affinities on approximate (Annoy)
    neighbours, PCA initialisation, learning rate n / 12 (Belkina et al. 2019), and the gradient's
    repulsive term by Barnes-Hut below :data:`TSNE_FFT_POINTS` points, by FFT interpolation
    (Linderman et al. 2019, linear in n) above. One thread below that size (threads only wait on
    each other there, worst on a busy machine with few cores), a fixed count per machine
    above; either way seeded runs repeat exactly."""
    from openTSNE import TSNE

    large = len(x) >= TSNE_FFT_POINTS
    tsne = TSNE(
        n_components=2,
        perplexity=perplexity,
        initialization="pca",
        negative_gradient_method="fft" if large else "bh",
        random_state=seed,
        n_jobs=_tsne_threads() if large else 1,
        verbose=False,
    )
    return np.asarray(tsne.fit(np.ascontiguousarray(x, dtype=np.float64)))


def _tsne_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def warm_up_umap(seed: int = 0) -> float:
    """Compile UMAP's numba kernels with a tiny fit; returns the seconds it took.

    ``force_approximation_algorithm`` makes the tiny fit take the nearest-neighbour-descent path
    that real (>= 4096 points) fits use, so those kernels are compiled too.
    """
    import umap

    started = time.perf_counter()
    x = np.random.default_rng(seed).normal(size=(300, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        umap.UMAP(
            n_components=2,
            n_neighbors=10,
            random_state=seed,
            n_epochs=20,
            force_approximation_algorithm=True,
        ).fit_transform(x)
    return time.perf_counter() - started


# ----------------------------------------------------------------------------- post-processing


def fit_postprocessor(fit_vectors: np.ndarray, name: str, params: dict | None = None):
    """A fitted :mod:`isoscope.analysis.projections.postprocess` transformer (by registry name) on
    ``fit_vectors`` (n, d)."""
    from isoscope.analysis.projections.postprocess import make_postprocessor

    return make_postprocessor(name, **(params or {})).fit(np.asarray(fit_vectors, dtype=np.float64))


def before_after(
    fit_vectors: np.ndarray,
    rows: np.ndarray,
    method: str,
    postprocess: str,
    params: dict | None = None,
    seed: int = 0,
) -> tuple[Projection, Projection]:
    """Projections of ``fit_vectors[rows]`` raw and after post-processing fitted on all ``fit_vectors``."""
    x = np.asarray(fit_vectors, dtype=np.float64)
    processed = fit_postprocessor(x, postprocess, params).transform(x[rows])
    before = project(x[rows], method, seed)
    after = project(processed, method, seed, pre_pca=postprocess != "whiten")
    return before, after


# ----------------------------------------------------------------------------- colours and hover


@dataclass(frozen=True)
class Colouring:
    """Colour values for n points: ``kind`` "categorical" (str values, ``order`` lists the legend)
    or "numeric" (float values)."""

    values: np.ndarray
    kind: str
    label: str
    order: tuple[str, ...] = ()


def _top_or_other(values: np.ndarray, top: int, other: str) -> Colouring:
    names, counts = np.unique(values.astype(str), return_counts=True)
    keep = names[np.argsort(-counts, kind="stable")[:top]]
    out = np.where(np.isin(values.astype(str), keep), values.astype(str), other).astype(object)
    order = tuple(keep.tolist()) + ((other,) if (out == other).any() else ())
    return Colouring(out, "categorical", "", order)


def token_colouring(sample_tokens, all_tokens, by: str) -> Colouring:
    """Colours of the sampled tokens (:class:`isoscope.engine.extraction.TokenTable`, n rows) by ``by``
    (see :data:`TOKEN_COLOURS`); ``all_tokens`` (the corpus's table) gives token frequencies."""
    if by not in TOKEN_COLOURS:
        raise InputError(f"unknown colouring {by!r}; choose one of: {', '.join(TOKEN_COLOURS)}")
    label = TOKEN_COLOURS[by]
    if by == "category":
        order = ("position 0", "special", "punctuation", "other")
        values = sample_tokens.category()
        return Colouring(
            values, "categorical", label, tuple(o for o in order if (values == o).any())
        )
    if by == "position":
        return Colouring(sample_tokens.position.astype(np.float64), "numeric", label)
    if by == "frequency":
        names, counts = np.unique(all_tokens.token, return_counts=True)
        lookup = dict(zip(names.tolist(), counts.tolist(), strict=True))
        freq = np.array([lookup.get(t, 1) for t in sample_tokens.token.tolist()], dtype=np.float64)
        return Colouring(np.log10(freq), "numeric", label)
    if by == "token":
        found = _top_or_other(sample_tokens.token, TOP_CATEGORIES, "other tokens")
    else:
        found = _top_or_other(
            np.array([f"text {t}" for t in sample_tokens.text_id]), TOP_CATEGORIES, "other texts"
        )
    return Colouring(found.values, found.kind, label, found.order)


def text_colouring(lengths: np.ndarray, by: str) -> Colouring:
    """Colours of mean-pooled texts: by length in tokens or by index (see :data:`TEXT_COLOURS`)."""
    if by not in TEXT_COLOURS:
        raise InputError(f"unknown colouring {by!r}; choose one of: {', '.join(TEXT_COLOURS)}")
    values = (
        np.asarray(lengths, dtype=np.float64)
        if by == "length"
        else np.arange(len(lengths), dtype=np.float64)
    )
    return Colouring(values, "numeric", TEXT_COLOURS[by])


def text_lengths(tokens, num_texts: int) -> np.ndarray:
    """Analysed tokens per text (int64 (num_texts,)) from a TokenTable."""
    return np.bincount(np.asarray(tokens.text_id, dtype=np.int64), minlength=num_texts)


def hover_contexts(tokens, rows: Sequence[int] | np.ndarray, width: int = 8) -> np.ndarray:
    """'left [token] right' for each token row of ``tokens`` (a TokenTable in text order), vectorised.

    Same text as :meth:`isoscope.engine.extraction.ExtractionResult.sample_context` (which takes one sample row):
    the tokens of the same text within ``width`` positions, the token itself in brackets.
    """
    rows = np.asarray(rows, dtype=np.int64)
    n = len(tokens)
    text_id, position, token = tokens.text_id, tokens.position, tokens.token
    pieces = []
    for offset in range(-width, width + 1):
        j = rows + offset
        ok = (j >= 0) & (j < n)
        jj = np.clip(j, 0, n - 1)
        ok &= (text_id[jj] == text_id[rows]) & (np.abs(position[jj] - position[rows]) <= width)
        word = np.where(ok, token[jj].astype(object), "")
        if offset == 0:
            word = np.array([f"[{w}]" for w in word], dtype=object)
        pieces.append(word)
    stacked = np.stack(pieces, axis=1)  # (n rows, 2 * width + 1)
    return np.array([" ".join(w for w in line if w) for line in stacked], dtype=object)


def text_snippets(texts: Sequence[str], limit: int = 120) -> np.ndarray:
    """Texts shortened for hover labels."""
    return np.array([t if len(t) <= limit else t[: limit - 1] + "…" for t in texts], dtype=object)


def coordinates_frame(
    before: Projection, after: Projection, colouring: Colouring, hover: np.ndarray, ids: np.ndarray
):
    """One row per point: id, colour value, hover text, x/y before and after (the CSV download)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "id": ids,
            "colour": colouring.values,
            "context": hover,
            "x_raw": before.coords[:, 0],
            "y_raw": before.coords[:, 1],
            "x_processed": after.coords[:, 0],
            "y_processed": after.coords[:, 1],
        }
    )


# ----------------------------------------------------------------------------- metric deltas


def metric_deltas(
    fit_vectors: np.ndarray,
    text_id: np.ndarray,
    postprocess: str,
    params: dict | None = None,
    n_pairs: int = N_PAIRS,
    seed: int = PAIR_SEED,
) -> list[dict]:
    """Isotropy metrics of ``fit_vectors`` (n, d) raw and after the post-processing (fitted on them).

    Rows: anisotropy (mean cosine of random different-text pairs; Ethayarajh 2019), IsoScore
    (Rudman et al. 2022; NaN with fewer points than dims), the top dimension's share of the mean
    cosine (Timkey & van Schijndel 2021) and the mean vector norm. Raw and processed use the same pairs.
    """
    raw = np.asarray(fit_vectors, dtype=np.float64)
    processed = fit_postprocessor(raw, postprocess, params).transform(raw)
    pairs = different_text_pairs(text_id, n_pairs, seed)

    def metrics(x: np.ndarray) -> dict[str, float]:
        out = {
            "anisotropy (mean cosine)": float("nan"),
            "top dimension's share of the mean cosine": float("nan"),
        }
        if len(pairs):
            out["anisotropy (mean cosine)"] = mean_pair_cosine(x, pairs)
            top = top_cosine_dims(cosine_contributions(x, pairs).mean(axis=0), 1)
            if top:
                out["top dimension's share of the mean cosine"] = float(top[0][1])
        out["IsoScore"] = isoscore(x) if x.shape[0] >= x.shape[1] >= 2 else float("nan")
        out["mean vector norm"] = float(np.linalg.norm(x, axis=1).mean())
        return out

    before, after = metrics(raw), metrics(processed)
    return [
        {"metric": k, "raw": before[k], "processed": after[k], "change": after[k] - before[k]}
        for k in before
    ]
