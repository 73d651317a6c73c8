"""Projections on synthetic clouds with planted structure: shapes, seeded determinism, PCA variance
order, neighbourhood quality (trustworthiness) of t-SNE and UMAP, colourings, hover contexts, figures."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.manifold import trustworthiness
from threadpoolctl import threadpool_limits

from isoscope.analysis.projections.methods import (
    Colouring,
    before_after,
    coordinates_frame,
    hover_contexts,
    metric_deltas,
    project,
    projection_sample,
    text_colouring,
    token_colouring,
)
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenTable
from isoscope.plots.projections import before_after_figure, category_colours


def planted_clusters(
    n_per: int = 60, k: int = 4, d: int = 80, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """k well-separated Gaussian clusters in d dims (labels returned)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(k, d))
    labels = np.repeat(np.arange(k), n_per)
    return centres[labels] + rng.normal(size=(k * n_per, d)), labels


def _same_cluster_neighbours(coords: np.ndarray, labels: np.ndarray, k: int = 5) -> float:
    dist = ((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(dist, np.inf)
    nearest = np.argsort(dist, axis=1)[:, :k]
    return float((labels[nearest] == labels[:, None]).mean())


def test_pca_shapes_variance_order_and_determinism():
    x, _ = planted_clusters()
    a = project(x, "pca", seed=3)
    b = project(x, "pca", seed=3)
    assert a.coords.shape == (len(x), 2)
    np.testing.assert_array_equal(a.coords, b.coords)
    r = a.explained_variance_ratio
    assert r.shape == (2,) and r[0] >= r[1] > 0 and r.sum() <= 1
    assert a.coords[:, 0].var() >= a.coords[:, 1].var()


def test_pca_first_axis_follows_a_planted_dominant_dimension():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 40))
    x[:, 7] *= 30.0  # a rogue dimension with huge variance
    pc = project(x, "pca").coords[:, 0]
    assert abs(np.corrcoef(pc, x[:, 7])[0, 1]) > 0.99
    assert project(x, "pca").explained_variance_ratio[0] > 0.9


def test_tsne_is_seeded_and_trustworthy():
    x, labels = planted_clusters(n_per=40)
    with threadpool_limits(1):  # OpenMP threads only fight each other on a small shared CPU
        a = project(x, "tsne", seed=1)
        b = project(x, "tsne", seed=1)
    np.testing.assert_allclose(a.coords, b.coords)
    assert a.pre_pca_variance is not None and 0 < a.pre_pca_variance <= 1
    assert trustworthiness(x, a.coords, n_neighbors=5) > 0.9
    assert _same_cluster_neighbours(a.coords, labels) > 0.95


def test_umap_is_seeded_and_trustworthy():
    """The only UMAP test (its first fit compiles numba kernels: ~1 min on 2 cores)."""
    x, labels = planted_clusters(n_per=50)
    a = project(x, "umap", seed=0)
    b = project(x, "umap", seed=0)
    np.testing.assert_allclose(a.coords, b.coords)
    assert a.coords.shape == (len(x), 2)
    assert trustworthiness(x, a.coords, n_neighbors=5) > 0.9
    assert _same_cluster_neighbours(a.coords, labels) > 0.95


def test_project_rejects_bad_input():
    with pytest.raises(InputError, match="at least"):
        project(np.zeros((3, 5)), "pca")
    with pytest.raises(InputError, match="unknown projection"):
        project(np.zeros((30, 5)), "mds")
    bad = np.ones((30, 5))
    bad[0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        project(bad, "pca")


def test_projection_sample_is_nested_sorted_and_seeded():
    small = projection_sample(1000, 100, seed=4)
    large = projection_sample(1000, 400, seed=4)
    assert len(small) == 100 and len(np.unique(small)) == 100
    assert np.all(np.diff(small) > 0)
    assert set(small) <= set(large)
    np.testing.assert_array_equal(small, projection_sample(1000, 100, seed=4))
    assert not np.array_equal(small, projection_sample(1000, 100, seed=5))
    assert len(projection_sample(50, 400)) == 50


def test_before_after_clip_removes_the_planted_dimension():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 30))
    x[:, 5] += 40.0 * rng.choice([-1.0, 1.0], size=400)  # a bimodal rogue dim dominating PCA
    rows = projection_sample(400, 200, 0)
    before, after = before_after(x, rows, "pca", "clip", {"dims": [5]})
    assert before.explained_variance_ratio[0] > 0.9
    assert after.explained_variance_ratio[0] < 0.3
    # the processed projection equals a PCA of the clipped rows
    clipped = x[rows].copy()
    clipped[:, 5] = 0
    np.testing.assert_allclose(
        np.abs(after.coords), np.abs(project(clipped, "pca").coords), atol=1e-8
    )


def test_metric_deltas_on_a_shifted_cloud():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(600, 20))
    x[:, 3] += (
        25.0  # a common direction: anisotropic (mean cosine near 1), IsoScore unaffected by the shift
    )
    text_id = np.arange(600) // 6
    rows = {r["metric"]: r for r in metric_deltas(x, text_id, "center")}
    aniso = rows["anisotropy (mean cosine)"]
    assert aniso["raw"] > 0.9 and abs(aniso["processed"]) < 0.05
    assert rows["top dimension's share of the mean cosine"]["raw"] > 0.95
    iso = rows["IsoScore"]
    assert iso["raw"] == pytest.approx(iso["processed"], abs=1e-9)  # IsoScore ignores a mean shift
    assert aniso["change"] == pytest.approx(aniso["processed"] - aniso["raw"])


def _tokens() -> TokenTable:
    # two texts: "[CLS] the bank , [SEP]" and "[CLS] the river bank the [SEP]"
    tok = np.array(
        ["[CLS]", "the", "bank", ",", "[SEP]", "[CLS]", "the", "river", "bank", "the", "[SEP]"]
    )
    text_id = np.array([0] * 5 + [1] * 6, dtype=np.int32)
    position = np.array([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5], dtype=np.int32)
    special = np.isin(tok, ["[CLS]", "[SEP]"])
    return TokenTable(
        text_id,
        position,
        tok,
        np.where(special, -1, position).astype(np.int32),
        special,
        tok == ",",
    )


def test_hover_contexts_stay_in_their_text_and_window():
    t = _tokens()
    out = hover_contexts(t, [2, 8, 5], width=2)
    assert out[0] == "[CLS] the [bank] , [SEP]"
    assert out[1] == "the river [bank] the [SEP]"
    assert out[2] == "[[CLS]] the river"


def test_token_colourings():
    t = _tokens()
    cat = token_colouring(t, t, "category")
    assert cat.kind == "categorical"
    assert list(cat.values[[0, 1, 3, 4]]) == ["position 0", "other", "punctuation", "special"]
    pos = token_colouring(t, t, "position")
    np.testing.assert_array_equal(pos.values, t.position)
    freq = token_colouring(t, t, "frequency")
    assert freq.values[1] == pytest.approx(np.log10(3))  # "the" occurs 3 times
    assert freq.values[7] == pytest.approx(0.0)  # "river" once
    text = token_colouring(t, t, "text")
    assert set(text.order) == {"text 0", "text 1"}
    with pytest.raises(InputError):
        token_colouring(t, t, "rainbow")
    lengths = text_colouring(np.array([5, 6]), "length")
    assert lengths.kind == "numeric" and list(lengths.values) == [5.0, 6.0]


def test_before_after_figure_panels_and_colours():
    x, labels = planted_clusters(n_per=20, k=3, d=10)
    rows = np.arange(len(x))
    before, after = before_after(x, rows, "pca", "standardize")
    names = np.array([f"c{i}" for i in labels], dtype=object)
    colouring = Colouring(names, "categorical", "cluster", ("c0", "c1", "c2"))
    hover = np.array([f"point {i}" for i in rows], dtype=object)
    fig = before_after_figure(before, after, colouring, hover)
    assert len(fig.data) == 6 and all(tr.type == "scattergl" for tr in fig.data)
    by_name = {}
    for tr in fig.data:
        by_name.setdefault(tr.name, []).append(tr)
    colours = category_colours(("c0", "c1", "c2"))
    for name, (left, right) in by_name.items():
        assert left.xaxis == "x" and right.xaxis == "x2"
        assert left.marker.color == right.marker.color == colours[name]
        assert len(left.x) == len(right.x) == 20
    numeric = before_after_figure(
        before, after, Colouring(rows.astype(float), "numeric", "index"), hover
    )
    assert len(numeric.data) == 2
    assert numeric.data[0].marker.cmin == numeric.data[1].marker.cmin == 0.0
    frame = coordinates_frame(before, after, colouring, hover, rows)
    assert list(frame.columns) == [
        "id",
        "colour",
        "context",
        "x_raw",
        "y_raw",
        "x_processed",
        "y_processed",
    ]
    assert len(frame) == len(x)


def test_other_category_is_grey():
    colours = category_colours(("a", "b", "other tokens"))
    assert colours["other tokens"] == "#c7c7c7" and colours["a"] != colours["b"]


def test_hover_contexts_equal_extraction_result_sample_context():
    """The vectorised hover labels are the same text as ExtractionResult.sample_context, row by row."""
    from types import SimpleNamespace

    from isoscope.engine.extraction import ExtractionResult

    rng = np.random.default_rng(5)
    lengths = rng.integers(3, 30, size=12)
    text_id = np.repeat(np.arange(12), lengths).astype(np.int32)
    position = np.concatenate([np.arange(n) for n in lengths]).astype(np.int32)
    keep = position != 0  # as with "exclude special tokens": positions have gaps
    words = np.array([f"w{i}" for i in range(len(text_id))])
    t = TokenTable(
        text_id[keep],
        position[keep],
        words[keep],
        position[keep],
        np.zeros(keep.sum(), bool),
        np.zeros(keep.sum(), bool),
    )
    sample_index = np.sort(rng.choice(len(t), size=40, replace=False))
    fake = SimpleNamespace(sample_index=sample_index, tokens=t)
    expected = [ExtractionResult.sample_context(fake, row) for row in range(40)]
    assert list(hover_contexts(t, sample_index)) == expected
