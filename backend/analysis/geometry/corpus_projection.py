"""Before/after projections of EVERY token of one hidden state (issue 35), streamed from a spilled
file (:class:`backend.engine.extraction.spill.SpilledState`) in bounded memory.

- **PCA** is exact and streaming: one pass accumulates, in float64, the shifted sum and Gram
  matrix ((d,) and (d, d)) of the raw vectors; an affine post-processing ``x A + b`` (all of
  ours) has covariance ``A^T C A``, any other gets sums of its own in the same pass; ``eigh`` of
  each covariance gives the two top directions; a second pass projects every row. Equal to an
  in-memory PCA to float64 rounding, with scikit-learn's sign rule (each component's largest
  entry positive), so both agree on orientation.
- **UMAP / t-SNE** at corpus scale fit on a seeded landmark sample (:data:`LANDMARKS` rows), then
  place every other row with the fitted model: umap-learn's ``UMAP.transform`` (McInnes et al.
  2018, section on embedding new points) and openTSNE's ``TSNEEmbedding.transform`` (Poličar et
  al. 2024: new points optimised against the fixed reference embedding). Landmarks keep their fit
  coordinates. The 50-dim pre-PCA of :mod:`projections` is fitted on the landmarks too.

Post-processing is fitted on the extraction's token sample of the state (as for the sampled view)
and applied to every row chunk by chunk, so "before" and "after" hold the same rows in the same
order (one colour key).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np

from backend.analysis.geometry.projections import (
    MIN_POINTS,
    PRE_PCA_DIMS,
    Projection,
    check_method,
    fit_postprocessor,
    projection_sample,
)
from backend.engine.errors import InputError
from backend.engine.extraction.spill import CHUNK_ROWS, Cancelled, SpilledState
from backend.engine.progress import Progress, report

LANDMARKS = 10_000  # UMAP / t-SNE fit rows at corpus scale (t-SNE of 10k takes ~10 s here)

Transform = Callable[[np.ndarray], np.ndarray]


class _Moments:
    """Shifted float64 sum and Gram matrix of streamed rows: cov = (G - s s^T / n) / (n - 1)."""

    def __init__(self, shift: np.ndarray):
        self.shift = np.asarray(shift, dtype=np.float64)
        d = len(self.shift)
        self.count, self.total, self.gram = 0, np.zeros(d), np.zeros((d, d))

    def add(self, x: np.ndarray) -> None:
        centred = x - self.shift
        self.count += len(x)
        self.total += centred.sum(axis=0)
        self.gram += centred.T @ centred

    def mean_cov(self) -> tuple[np.ndarray, np.ndarray]:
        mean_shift = self.total / self.count
        cov = (self.gram - np.outer(self.total, mean_shift)) / max(self.count - 1, 1)
        return self.shift + mean_shift, cov


def top_components(cov: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(components (k, d), explained variance ratio (k,)) of a covariance matrix, with
    scikit-learn's sign rule (svd_flip on the components: the largest |entry| of each positive)."""
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:k]
    components = vectors[:, order].T
    signs = np.sign(components[np.arange(k), np.argmax(np.abs(components), axis=1)])
    components *= np.where(signs == 0, 1.0, signs)[:, None]
    trace = float(np.clip(values, 0, None).sum())
    return components, np.clip(values[order], 0, None) / (trace if trace > 0 else 1.0)


def affine_form(transform: Transform, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(A (d, d'), b (d',))`` with ``transform(x) == x @ A + b``, checked on ``probe`` rows; None
    when the transform is not affine. Every post-processor here is (clip, centring, z-score,
    all-but-the-top, whitening): then the transformed covariance is ``A^T C A`` of the raw one,
    and one pass over the raw rows serves both panels."""
    probe = np.asarray(probe, dtype=np.float64)
    d = probe.shape[1]
    b = transform(np.zeros((1, d)))[0]
    a = transform(np.eye(d)) - b
    scale = max(1.0, float(np.abs(transform(probe)).max()))
    if np.abs(transform(probe) - (probe @ a + b)).max() > 1e-9 * scale:
        return None
    return a, b


def _check(spilled: SpilledState, method: str) -> str:
    method = check_method(method)
    if spilled.rows < MIN_POINTS:
        raise InputError(f"a projection needs at least {MIN_POINTS} points, got {spilled.rows}")
    return method


def _tick(progress: Progress | None, done: int, total: int) -> None:
    if not report(progress, done, total):
        raise Cancelled(f"stopped after {done:,} of {total:,} rows")


def streaming_pca(
    spilled: SpilledState,
    transforms: tuple[Transform, ...],
    probe: np.ndarray,
    *,
    chunk_rows: int = CHUNK_ROWS,
    progress: Progress | None = None,
) -> list[Projection]:
    """Exact PCA to 2-D of every row of ``spilled`` under each transform (module doc); one
    :class:`Projection` per transform, float32 coordinates in file order. ``probe``: a few
    hundred rows (the token sample) that shift the float64 sums (any shift is exact; a close
    one keeps them well conditioned) and show which transforms are affine (:func:`affine_form`):
    those need no sums of their own."""
    started = time.perf_counter()
    probe = np.asarray(probe, dtype=np.float64)[:512]
    forms = [affine_form(t, probe) for t in transforms]
    raw = _Moments(probe.mean(axis=0))
    own = [
        None if f else _Moments(t(probe).mean(axis=0))
        for t, f in zip(transforms, forms, strict=True)
    ]
    total = 2 * spilled.rows
    for start, block in spilled.chunks(chunk_rows):
        x = block.astype(np.float64)
        raw.add(x)
        for m, transform in zip(own, transforms, strict=True):
            if m is not None:
                m.add(transform(x))
        _tick(progress, start + len(block), total)
    mean, cov = raw.mean_cov()
    fitted = []  # (affine map of raw rows or None, mean, components, ratio)
    for form, m in zip(forms, own, strict=True):
        if form is not None:
            a, b = form
            components, ratio = top_components(a.T @ cov @ a)
            fitted.append((a @ components.T, mean, None, ratio))  # coords = (x - mean) a c^T
        else:
            t_mean, t_cov = m.mean_cov()
            components, ratio = top_components(t_cov)
            fitted.append((None, t_mean, components, ratio))
    coords = [np.empty((spilled.rows, 2), dtype=np.float32) for _ in transforms]
    for start, block in spilled.chunks(chunk_rows):
        x = block.astype(np.float64)
        for out, (w, m_t, components, _), transform in zip(coords, fitted, transforms, strict=True):
            rows = slice(start, start + len(block))
            out[rows] = (x - m_t) @ w if w is not None else (transform(x) - m_t) @ components.T
        _tick(progress, spilled.rows + start + len(block), total)
    seconds = time.perf_counter() - started
    return [
        Projection(c, "pca", 0, seconds, explained_variance_ratio=f[3])
        for c, f in zip(coords, fitted, strict=True)
    ]


def _fit_landmarks(x: np.ndarray, method: str, seed: int, pre_pca: bool):
    """(pre-PCA or None, fitted model, fit embedding (L, 2), kept variance share) on landmarks."""
    from sklearn.decomposition import PCA

    pca, kept = None, None
    if pre_pca and x.shape[1] > PRE_PCA_DIMS:
        pca = PCA(n_components=PRE_PCA_DIMS, random_state=seed, svd_solver="covariance_eigh")
        x = pca.fit_transform(x)
        kept = float(pca.explained_variance_ratio_.sum())
    n = len(x)
    if method == "umap":
        import umap

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = umap.UMAP(
                n_components=2, n_neighbors=int(min(15, n - 1)), random_state=seed
            ).fit(x)
        return pca, model, np.asarray(model.embedding_, dtype=np.float32), kept
    from openTSNE import TSNE

    model = TSNE(
        n_components=2,
        perplexity=float(min(30.0, (n - 1) / 3.0)),
        initialization="pca",
        negative_gradient_method="fft" if n >= 10_000 else "bh",
        random_state=seed,
        n_jobs=1,
        verbose=False,
    ).fit(np.ascontiguousarray(x, dtype=np.float64))
    return pca, model, np.asarray(model, dtype=np.float32), kept


def _place(model, method: str, x: np.ndarray) -> np.ndarray:
    """Coordinates of new rows under a landmark fit (UMAP.transform / TSNEEmbedding.transform)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "umap":
            return np.asarray(model.transform(x), dtype=np.float32)
        return np.asarray(model.transform(np.ascontiguousarray(x, dtype=np.float64)), np.float32)


def landmark_projection(
    spilled: SpilledState,
    transforms: tuple[Transform, ...],
    method: str,
    *,
    landmarks: int = LANDMARKS,
    seed: int = 0,
    pre_pca: tuple[bool, ...] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    progress: Progress | None = None,
) -> tuple[list[Projection], np.ndarray]:
    """UMAP or t-SNE of every row: fit on a seeded sample of ``landmarks`` rows, every other row
    transformed (module doc). Returns one :class:`Projection` per transform (its ``landmarks``
    says how many were fitted) and the landmark rows (sorted)."""
    method = _check(spilled, method)
    if method == "pca":
        raise InputError("PCA of every token is exact: use streaming_pca, not landmarks")
    started = time.perf_counter()
    rows = projection_sample(spilled.rows, landmarks, seed)
    is_landmark = np.zeros(spilled.rows, dtype=bool)
    is_landmark[rows] = True
    raw = spilled.take(rows).astype(np.float64)
    pre_pca = pre_pca or tuple(True for _ in transforms)
    fits = [
        _fit_landmarks(t(raw), method, seed, p) for t, p in zip(transforms, pre_pca, strict=True)
    ]
    coords = []
    for _, _, embedding, _ in fits:
        out = np.empty((spilled.rows, 2), dtype=np.float32)
        out[rows] = embedding
        coords.append(out)
    for start, block in spilled.chunks(chunk_rows):
        new = np.flatnonzero(~is_landmark[start : start + len(block)])
        if len(new):
            x = block[new].astype(np.float64)
            for out, (pca, model, _, _), transform in zip(coords, fits, transforms, strict=True):
                y = transform(x)
                out[start + new] = _place(model, method, pca.transform(y) if pca else y)
        _tick(progress, start + len(block), spilled.rows)
    seconds = time.perf_counter() - started
    return [
        Projection(c, method, seed, seconds, pre_pca_variance=kept, landmarks=len(rows))
        for c, (_, _, _, kept) in zip(coords, fits, strict=True)
    ], rows


def corpus_before_after(
    spilled: SpilledState,
    fit_vectors: np.ndarray,
    method: str,
    postprocess: str,
    params: dict | None = None,
    seed: int = 0,
    *,
    landmarks: int = LANDMARKS,
    chunk_rows: int = CHUNK_ROWS,
    progress: Progress | None = None,
) -> tuple[Projection, Projection]:
    """Raw and post-processed projections of every row of ``spilled``; the post-processing is
    fitted on ``fit_vectors`` (the token sample of the same state)."""
    method = _check(spilled, method)
    fit = np.asarray(fit_vectors, dtype=np.float64)
    post = fit_postprocessor(fit, postprocess, params)
    transforms = (lambda x: x, post.transform)
    if method == "pca":
        before, after = streaming_pca(
            spilled, transforms, fit, chunk_rows=chunk_rows, progress=progress
        )
        return before, after
    (before, after), _ = landmark_projection(
        spilled,
        transforms,
        method,
        landmarks=landmarks,
        seed=seed,
        pre_pca=(True, postprocess != "whiten"),
        chunk_rows=chunk_rows,
        progress=progress,
    )
    return before, after
