"""Before/after projections of EVERY token of one hidden state, streamed from a spilled
file (:class:`isoscope.engine.extraction.spill.SpilledState`) in bounded memory.

- **PCA** is exact and streaming: one pass accumulates, in float64, the shifted sum and Gram
  matrix ((d,) and (d, d)) of the raw vectors; an affine post-processing ``x A + b`` (all of
  ours) has covariance ``A^T C A``, any other gets sums of its own in the same pass; ``eigh`` of
  each covariance gives the two top directions; a second pass projects every row. Equal to an
  in-memory PCA to float64 rounding, with scikit-learn's sign rule (each component's largest
  entry positive), so both agree on orientation.
- **UMAP / t-SNE** at corpus scale fit on a seeded landmark sample (:data:`LANDMARKS` rows); every
  other row is then placed by an exact kNN against the landmarks, in the space the fit saw (the
  50-dim pre-PCA of :mod:`projections`, fitted on the landmarks), at the weighted mean of its
  :data:`NEIGHBOURS` nearest landmarks' fit coordinates with UMAP's membership weights. This is
  umap-learn's own transform *initialisation* (``smooth_knn_dist`` with ``local_connectivity - 1
  = 0``, then ``init_graph_transform``: a row equal to a landmark takes its coordinates; McInnes
  et al. 2018, section on embedding new points), without the 30-100 optimisation epochs that
  follow it in ``UMAP.transform``, which take hours for a million rows on two cores. For t-SNE
  the same placement stands in for openTSNE's ``transform`` (whose own start is the median of
  the nearest reference points; Poličar et al. 2024). The kNN is a brute-force float32 matmul
  (torch) in blocks of at most :data:`KNN_BLOCK_FLOATS` distances, the chosen neighbours'
  distances recomputed in float64. Landmarks keep their fit coordinates.

Post-processing is fitted on the extraction's token sample of the state (as for the sampled view)
and applied to every row chunk by chunk, so "before" and "after" hold the same rows in the same
order (one colour key).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
import torch

from isoscope.analysis.projections.methods import (
    MIN_POINTS,
    PRE_PCA_DIMS,
    Projection,
    check_method,
    fit_postprocessor,
    projection_sample,
)
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError
from isoscope.engine.extraction.spill import CHUNK_ROWS, Cancelled, SpilledState

LANDMARKS = 10_000  # UMAP / t-SNE fit rows at corpus scale (a fit of this size takes seconds)
NEIGHBOURS = 15  # landmarks per placed row: UMAP's n_neighbors default, the k of its transform
KNN_BLOCK_FLOATS = 2**24  # distances per kNN block: 64 MiB of float32 (1,677 rows x 10k landmarks)
_SMOOTH_K_TOLERANCE, _MIN_K_DIST_SCALE = 1e-5, 1e-3  # umap.umap_'s constants

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
    from threadpoolctl import threadpool_limits  # scikit-learn's dependency

    # one BLAS thread: a few hundred dims decompose quickly alone, but OpenBLAS's threads spin
    # against each other (and against torch's) on a busy machine with few cores
    with threadpool_limits(1 if len(cov) <= 1024 else None, user_api="blas"):
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
    # (affine map of raw rows or None, mean, components or None, ratio)
    fitted: list[tuple[np.ndarray | None, np.ndarray, np.ndarray | None, np.ndarray]] = []
    for form, m in zip(forms, own, strict=True):
        if form is not None:
            a, b = form
            components, ratio = top_components(a.T @ cov @ a)
            fitted.append((a @ components.T, mean, None, ratio))  # coords = (x - mean) a c^T
        else:
            assert m is not None  # a transform without an affine form has its own moments
            t_mean, t_cov = m.mean_cov()
            components, ratio = top_components(t_cov)
            fitted.append((None, t_mean, components, ratio))
    coords = [np.empty((spilled.rows, 2), dtype=np.float32) for _ in transforms]
    for start, block in spilled.chunks(chunk_rows):
        x = block.astype(np.float64)
        for out, (w, m_t, comps, _), transform in zip(coords, fitted, transforms, strict=True):
            rows = slice(start, start + len(block))
            if w is not None:
                out[rows] = (x - m_t) @ w
            else:
                assert comps is not None  # fitted on the transform's own moments
                out[rows] = (transform(x) - m_t) @ comps.T
        _tick(progress, spilled.rows + start + len(block), total)
    seconds = time.perf_counter() - started
    return [
        Projection(c, "pca", 0, seconds, explained_variance_ratio=f[3])
        for c, f in zip(coords, fitted, strict=True)
    ]


def _fit_landmarks(x: np.ndarray, method: str, seed: int, pre_pca: bool):
    """(pre-PCA or None, fit embedding (L, 2), kept variance share) on landmarks."""
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
        return pca, np.asarray(model.embedding_, dtype=np.float32), kept
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
    return pca, np.asarray(model, dtype=np.float32), kept


def nearest_landmarks(
    queries: np.ndarray, landmarks: np.ndarray, k: int = NEIGHBOURS
) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN of every query row among the landmark rows (both (., p)): float64 distances and
    int64 indices (m, k), nearest first. Brute force, blocks of :data:`KNN_BLOCK_FLOATS`
    float32 squared distances (``|l|^2 - 2 q.l``, one torch matmul) pick the neighbours;
    their distances are then recomputed in float64, so a duplicate of a landmark is at 0."""
    k = min(k, len(landmarks))
    centre = np.asarray(landmarks, dtype=np.float64).mean(axis=0)  # float32 keeps more digits
    ref64 = np.asarray(landmarks, dtype=np.float64) - centre
    # |q - l|^2 - |q|^2 = [q, 1] . [-2 l, |l|^2]: one matmul per block, no second pass over it
    ref = np.concatenate([-2 * ref64, (ref64**2).sum(axis=1, keepdims=True)], axis=1)
    ref32 = torch.from_numpy(np.ascontiguousarray(ref.T, dtype=np.float32))  # (p + 1, L)
    block = max(1, KNN_BLOCK_FLOATS // len(landmarks))
    dists = np.empty((len(queries), k))
    indices = np.empty((len(queries), k), dtype=np.int64)
    for at in range(0, len(queries), block):
        q64 = np.asarray(queries[at : at + block], dtype=np.float64) - centre
        q32 = torch.from_numpy(np.hstack([q64, np.ones((len(q64), 1))]).astype(np.float32))
        squared = q32 @ ref32  # (b, L): squared distances minus |q|^2
        picked = to_numpy(torch.topk(squared, k, dim=1, largest=False, sorted=False).indices, None)
        exact = np.linalg.norm(q64[:, None, :] - ref64[picked], axis=2)  # (b, k)
        order = np.argsort(exact, axis=1, kind="stable")
        dists[at : at + block] = np.take_along_axis(exact, order, axis=1)
        indices[at : at + block] = np.take_along_axis(picked, order, axis=1)
    return dists, indices


def membership_weights(dists: np.ndarray, n_iter: int = 64) -> np.ndarray:
    """UMAP's membership strengths of new rows to their k nearest training rows, as in
    ``UMAP.transform``: ``exp(-d / sigma)`` (rho = 0: ``local_connectivity - 1``), each row's
    sigma found by bisection so that the strengths of neighbours 2..k sum to ``log2(k)``, with
    umap's floor of 1e-3 x the mean distance (of this block; umap takes the whole call's). A
    vectorised ``umap.umap_.smooth_knn_dist`` + ``compute_membership_strengths`` (tested equal)."""
    dists = np.asarray(dists, dtype=np.float64)
    m, k = dists.shape
    target = np.log2(k)
    lo, hi, mid = np.zeros(m), np.full(m, np.inf), np.ones(m)
    active = np.ones(m, dtype=bool)
    for _ in range(n_iter):
        if not active.any():
            break
        psum = np.exp(-dists[:, 1:] / mid[:, None]).sum(axis=1)  # d > 0: exp; d == 0: 1
        active &= np.abs(psum - target) >= _SMOOTH_K_TOLERANCE
        high = active & (psum > target)
        low = active & ~high
        hi[high] = mid[high]
        mid[high] = (lo[high] + hi[high]) / 2
        lo[low] = mid[low]
        mid[low] = np.where(np.isinf(hi[low]), mid[low] * 2, (lo[low] + hi[low]) / 2)
    sigma = np.maximum(mid, _MIN_K_DIST_SCALE * dists.mean())
    return np.where(sigma[:, None] > 0, np.exp(-dists / sigma[:, None]), 1.0)


def knn_placement(
    queries: np.ndarray, landmarks: np.ndarray, embedding: np.ndarray, k: int = NEIGHBOURS
) -> np.ndarray:
    """float32 (m, 2) places of new rows: the membership-weighted mean of their ``k`` nearest
    landmarks' ``embedding`` rows; a row equal to a landmark takes its place (umap-learn's
    ``init_graph_transform``; module doc)."""
    dists, indices = nearest_landmarks(queries, landmarks, k)
    weights = membership_weights(dists)
    placed = np.einsum(
        "mk,mkc->mc", weights / weights.sum(axis=1, keepdims=True), embedding[indices]
    )
    exact = dists[:, 0] == 0.0
    placed[exact] = embedding[indices[exact, 0]]
    return placed.astype(np.float32)


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
    placed by kNN among them (module doc). Returns one :class:`Projection` per transform (its ``landmarks``
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
    fit_seconds = time.perf_counter() - started
    # each fit's landmarks as the placement sees them: through the same pre-PCA as new rows
    spaces = [
        pca.transform(t(raw)) if pca else t(raw)
        for (pca, _, _), t in zip(fits, transforms, strict=True)
    ]
    coords = []
    for _, embedding, _ in fits:
        out = np.empty((spilled.rows, 2), dtype=np.float32)
        out[rows] = embedding
        coords.append(out)
    for start, block in spilled.chunks(chunk_rows):
        new = np.flatnonzero(~is_landmark[start : start + len(block)])
        if len(new):
            x = block[new].astype(np.float64)
            for out, (pca, embedding, _), space, transform in zip(
                coords, fits, spaces, transforms, strict=True
            ):
                y = transform(x)
                out[start + new] = knn_placement(pca.transform(y) if pca else y, space, embedding)
        _tick(progress, start + len(block), spilled.rows)
    seconds = time.perf_counter() - started
    return [
        Projection(
            c,
            method,
            seed,
            seconds,
            pre_pca_variance=kept,
            landmarks=len(rows),
            fit_seconds=fit_seconds,
        )
        for c, (_, _, kept) in zip(coords, fits, strict=True)
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
