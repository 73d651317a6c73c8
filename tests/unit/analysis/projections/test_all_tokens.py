"""Landmark UMAP / t-SNE at corpus scale (issue 35) on a spilled file of planted clusters."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.projections.all_tokens import landmark_projection, streaming_pca
from isoscope.engine.errors import InputError
from isoscope.engine.extraction.spill import Cancelled, SpilledState

pytestmark = pytest.mark.unit


def spilled_clusters(
    tmp_path, per_cluster: int = 150, dim: int = 8
) -> tuple[SpilledState, np.ndarray]:
    """Three separated Gaussian clusters, every vector written twice (rows i and i + half)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=8.0, size=(3, dim))
    labels = np.repeat(np.arange(3), per_cluster)
    half = (centres[labels] + rng.normal(size=(len(labels), dim))).astype(np.float32)
    vectors = np.concatenate([half, half])
    path = tmp_path / "clusters.f32"
    vectors.tofile(path)
    return SpilledState(path, len(vectors), dim, 0), np.concatenate([labels, labels])


def test_transformed_copies_of_landmarks_land_on_their_fit_embedding(tmp_path):
    spilled, labels = spilled_clusters(tmp_path)
    half = spilled.rows // 2
    (projection,), rows = landmark_projection(
        spilled, (lambda x: x,), "tsne", landmarks=half, seed=0, chunk_rows=64
    )
    assert projection.landmarks == half and projection.how.startswith(
        "landmark t-SNE (450 fitted) + kNN"
    )
    coords = projection.coords
    twin = np.where(rows < half, rows + half, rows - half)  # the same vector in another row
    placed = ~np.isin(twin, rows)  # twins that were transformed, not fitted
    assert placed.sum() > 50
    spread = np.linalg.norm(coords.max(axis=0) - coords.min(axis=0))
    gap = np.linalg.norm(coords[rows[placed]] - coords[twin[placed]], axis=1)
    assert np.median(gap) < 0.05 * spread
    # and every transformed row sits in its own cluster: nearest landmark has its label
    others = np.setdiff1d(np.arange(spilled.rows), rows)
    nearest = np.argmin(
        ((coords[others, None, :] - coords[None, rows, :]) ** 2).sum(axis=2), axis=1
    )
    assert (labels[rows[nearest]] == labels[others]).mean() > 0.98


def test_streaming_pca_finds_the_planted_direction(tmp_path):
    spilled, labels = spilled_clusters(tmp_path)
    x = spilled.take(np.arange(spilled.rows)).astype(np.float64)
    (projection,) = streaming_pca(spilled, (lambda v: v,), x[:20], chunk_rows=50)
    centred = x - x.mean(axis=0)
    top = np.linalg.svd(centred, full_matrices=False)[2][0]
    assert abs(np.corrcoef(projection.coords[:, 0], centred @ top)[0, 1]) > 0.9999


def test_cancelling_a_landmark_projection_raises(tmp_path):
    spilled, _ = spilled_clusters(tmp_path)
    with pytest.raises(Cancelled):
        landmark_projection(
            spilled, (lambda x: x,), "tsne", landmarks=100, progress=lambda d, t: False
        )
    with pytest.raises(InputError, match="exact"):
        landmark_projection(spilled, (lambda x: x,), "pca")


def test_affine_and_other_transforms_both_give_the_in_memory_pca(tmp_path):
    from sklearn.decomposition import PCA

    from isoscope.analysis.projections.all_tokens import affine_form

    spilled, _ = spilled_clusters(tmp_path)
    x = spilled.take(np.arange(spilled.rows)).astype(np.float64)

    def clip(v):
        out = v.copy()
        out[:, 2] = 0.0
        return out

    assert affine_form(clip, x[:30]) is not None and affine_form(np.tanh, x[:30]) is None
    projections = streaming_pca(spilled, (clip, np.tanh), x[:40], chunk_rows=37)
    for projection, transform in zip(projections, (clip, np.tanh), strict=True):
        y = transform(x)
        reference = PCA(n_components=2, svd_solver="full").fit(y)
        np.testing.assert_allclose(projection.coords, reference.transform(y), atol=1e-4)


def test_knn_placement_is_umaps_own_transform_initialisation():
    """The placement equals umap-learn's: its kNN (brute force), smooth_knn_dist with
    local_connectivity 0, compute_membership_strengths (bipartite) and init_graph_transform."""
    import scipy.sparse
    import umap.umap_ as reference

    from isoscope.analysis.projections import all_tokens as cp

    rng = np.random.default_rng(1)
    landmarks = rng.normal(size=(300, 6))
    embedding = rng.normal(size=(300, 2)).astype(np.float32)
    queries = np.concatenate([rng.normal(size=(120, 6)), landmarks[:5]])  # 5 exact duplicates
    dmat = np.linalg.norm(queries[:, None] - landmarks[None], axis=2)
    indices = np.argsort(dmat, axis=1)[:, :15]
    dists = np.take_along_axis(dmat, indices, axis=1).astype(np.float32)
    sigmas, rhos = reference.smooth_knn_dist(dists, 15.0, local_connectivity=0.0)
    r, c, v, _ = reference.compute_membership_strengths(
        indices, dists, sigmas, rhos, bipartite=True
    )
    graph = scipy.sparse.coo_matrix((v, (r, c)), shape=(len(queries), len(landmarks))).tocsr()
    expected = reference.init_graph_transform(graph, embedding)

    got_d, got_i = cp.nearest_landmarks(queries, landmarks)
    np.testing.assert_array_equal(got_i, indices)
    np.testing.assert_allclose(got_d, dists, rtol=1e-5)
    placed = cp.knn_placement(queries, landmarks, embedding)
    np.testing.assert_allclose(placed, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(placed[-5:], embedding[:5])


def test_the_knn_runs_in_bounded_blocks(monkeypatch):
    from isoscope.analysis.projections import all_tokens as cp

    rng = np.random.default_rng(2)
    landmarks, queries = rng.normal(size=(50, 4)), rng.normal(size=(333, 4))
    whole = cp.nearest_landmarks(queries, landmarks, 7)
    monkeypatch.setattr(cp, "KNN_BLOCK_FLOATS", 50 * 16)  # blocks of 16 rows
    blocked = cp.nearest_landmarks(queries, landmarks, 7)
    np.testing.assert_array_equal(blocked[1], whole[1])
    np.testing.assert_allclose(blocked[0], whole[0])
