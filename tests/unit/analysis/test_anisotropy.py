"""Isotropy metrics on synthetic point clouds with planted structure (docs/methods.md section 2)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from isoscope.analysis.anisotropy import (
    anisotropy,
    anisotropy_by_state,
    by_state,
    clipped_anisotropy_by_state,
    cosine_contributions,
    cosine_histogram,
    cosine_rows,
    different_text_pairs,
    intra_text_similarity,
    isoscore,
    mean_pair_cosine,
    pair_cosines,
    recurring_words,
    self_similarity,
    top_cosine_dims,
    unit_rows,
)
from isoscope.analysis.projections.postprocess import make_postprocessor
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenTable

RNG = np.random.default_rng(0)


# ----------------------------------------------------------------------------- IsoScore


def test_isoscore_isotropic_gaussian_is_near_one():
    points = np.random.default_rng(1).normal(size=(20_000, 384))
    assert 0.97 < isoscore(points) <= 1.0


def test_isoscore_points_on_a_line_is_zero():
    rng = np.random.default_rng(2)
    line = np.outer(rng.normal(size=2000), rng.normal(size=20)) + 5.0
    assert isoscore(line) == pytest.approx(0.0, abs=1e-9)


def test_isoscore_flat_disk_in_3d_is_one_half():
    rng = np.random.default_rng(3)
    angle, radius = rng.uniform(0, 2 * np.pi, 20_000), np.sqrt(rng.uniform(0, 1, 20_000))
    disk = np.stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros_like(angle)], axis=1)
    assert isoscore(disk) == pytest.approx(0.5, abs=0.01)


def test_isoscore_ignores_mean_shifts_while_mean_cosine_does_not():
    rng = np.random.default_rng(4)
    cloud = rng.normal(size=(4000, 32))
    shifted = cloud + 8.0  # every vector moves along the diagonal
    text_id = np.arange(4000) // 10
    assert isoscore(shifted) == pytest.approx(isoscore(cloud), abs=1e-9)
    assert abs(anisotropy(cloud, text_id)) < 0.02
    assert anisotropy(shifted, text_id) > 0.9


def test_isoscore_is_rotation_invariant_and_sees_unequal_variances():
    rng = np.random.default_rng(5)
    stretched = rng.normal(size=(5000, 16)) * np.r_[np.full(8, 10.0), np.full(8, 0.1)]
    rotation, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    assert isoscore(stretched @ rotation) == pytest.approx(isoscore(stretched), abs=1e-9)
    assert 0.3 < isoscore(stretched) < 0.6  # about half the dimensions used


def test_isoscore_needs_as_many_points_as_dims():
    with pytest.raises(InputError, match="at least as many points as dimensions"):
        isoscore(np.ones((10, 20)))
    assert np.isnan(isoscore(np.ones((30, 20))))  # no spread at all


# ----------------------------------------------------------------------------- histogram, Timkey


def test_cosine_histogram_has_fixed_edges_and_keeps_every_value():
    edges, counts = cosine_histogram(np.array([-1.0, -0.01, 0.0, 0.5, 1.0, 1.0 + 1e-15]), bins=4)
    np.testing.assert_allclose(edges, [-1, -0.5, 0, 0.5, 1])
    assert counts.tolist() == [1, 1, 1, 3]
    with pytest.raises(InputError):
        cosine_histogram(np.zeros(3), bins=0)


def test_contributions_sum_to_the_pair_cosines():
    x = RNG.normal(size=(300, 12)) + 1.0
    pairs = different_text_pairs(np.arange(300) // 3, 500, seed=1)
    terms = cosine_contributions(x, pairs)
    np.testing.assert_allclose(terms.sum(axis=1), pair_cosines(x, pairs), atol=1e-12)


def test_planted_dominant_dimension_carries_the_cosine():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2000, 64))
    x[:, 17] += 25.0  # one rogue dimension with a huge mean (Timkey & van Schijndel)
    pairs = different_text_pairs(np.arange(2000) // 4, 5000, seed=0)
    contributions = cosine_contributions(x, pairs).mean(axis=0)
    top = top_cosine_dims(contributions, k=3)
    assert top[0][0] == 17
    assert top[0][1] > 0.9
    assert len(top) == 3
    assert sum(share for _, share in top_cosine_dims(contributions, k=64)) == pytest.approx(1.0)


def test_top_cosine_dims_share_is_undefined_without_a_mean_cosine():
    assert np.isnan(top_cosine_dims(np.array([0.1, -0.1, 0.0]), 2)[0][1])


# ----------------------------------------------------------------------------- self / intra-text


def _table(text_id, token, word_id, special=None, punct=None) -> TokenTable:
    n = len(text_id)
    return TokenTable(
        text_id=np.asarray(text_id, dtype=np.int32),
        position=np.arange(n, dtype=np.int32),
        token=np.asarray(token),
        word_id=np.asarray(word_id, dtype=np.int32),
        is_special=np.zeros(n, bool) if special is None else np.asarray(special),
        is_punct=np.zeros(n, bool) if punct is None else np.asarray(punct),
    )


def test_recurring_words_rule():
    tokens = _table(
        text_id=[0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2],
        token=[
            "[CLS]",
            "bank",
            "play",
            "##ing",
            ".",
            "[CLS]",
            "bank",
            "play",
            "##ing",
            ".",
            "Ġbank",
            "solo",
        ],
        word_id=[-1, 0, 1, 1, 2, -1, 0, 1, 1, 2, 0, 1],
        special=[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        punct=[0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0],
    )
    found = recurring_words(tokens)
    # "bank" (3 texts; "Ġbank" is the same word) recurs; "play" is split into 2 pieces, "[CLS]" is
    # special, "." is punctuation, "solo" occurs in one text only
    assert found.words == ("bank",)
    assert sorted(map(tuple, found.pairs.tolist())) == [(1, 6), (1, 10), (6, 10)]


def test_self_similarity_on_a_planted_word():
    rng = np.random.default_rng(7)
    n_texts, d = 40, 32
    bank = rng.normal(size=d)
    text_id, token, word_id, vectors = [], [], [], []
    for t in range(n_texts):
        for w, name in enumerate(["bank", f"filler{t}"]):
            text_id.append(t)
            token.append(name)
            word_id.append(w)
            vectors.append(
                bank + 0.1 * rng.normal(size=d) if name == "bank" else rng.normal(size=d)
            )
    tokens = _table(text_id, token, word_id)
    found = recurring_words(tokens, max_occurrences=100)
    assert found.words == ("bank",)
    assert len(found.pairs) == n_texts * (n_texts - 1) // 2
    unit = unit_rows(np.array(vectors))
    assert self_similarity(unit, found) > 0.95
    # replacing "bank"'s vectors with random ones drops its self-similarity to ~0
    random_unit = unit_rows(rng.normal(size=(len(vectors), d)))
    assert abs(self_similarity(random_unit, found)) < 0.1
    assert np.isnan(self_similarity(unit, recurring_words(_table([0], ["x"], [0]))))


def test_intra_text_similarity():
    rng = np.random.default_rng(8)
    text_id = np.repeat(np.arange(50), 6)
    same = unit_rows(np.repeat(rng.normal(size=(50, 16)), 6, axis=0))
    assert intra_text_similarity(same, text_id) == pytest.approx(1.0)
    noisy = unit_rows(rng.normal(size=(300, 16)))
    # 6 random unit vectors in 16-D: each has cosine ~ 1/sqrt(6) with their mean direction
    assert 0.3 < intra_text_similarity(noisy, text_id) < 0.55


# ----------------------------------------------------------------------------- by_state


@pytest.fixture(scope="module")
def fake_result():
    """Three 'hidden states' of 1,200 tokens in 24-D: isotropic, mean-shifted, one rogue dim."""
    rng = np.random.default_rng(9)
    n, d = 1200, 24
    base = rng.normal(size=(n, d))
    shifted = base + 3.0
    rogue = base.copy()
    rogue[:, 5] += 20.0
    text_id = np.repeat(np.arange(120), 10)
    word = np.tile(np.arange(10), 120)
    tokens = _table(text_id, np.array([f"w{w % 5}" for w in word]), word)
    return SimpleNamespace(
        sample_vectors=np.stack([base, shifted, rogue]).astype(np.float32),
        sample_index=np.arange(n),
        tokens=tokens,
        sample_tokens=tokens,
        num_states=3,
        state_names=["emb", "1", "2"],
    )


def test_by_state_raw_matches_backend_anisotropy(fake_result):
    raw = by_state(fake_result, n_pairs=3000)
    np.testing.assert_allclose(raw.anisotropy, anisotropy_by_state(fake_result, n_pairs=3000))
    np.testing.assert_allclose(raw.contributions.sum(axis=1), raw.anisotropy, atol=1e-12)
    assert raw.histogram_counts.shape == (3, 40)
    assert (raw.histogram_counts.sum(axis=1) == raw.n_pairs).all()
    assert raw.isoscore[0] > 0.9 and raw.isoscore[1] == pytest.approx(raw.isoscore[0], abs=1e-6)
    assert raw.anisotropy[1] > 0.8 and abs(raw.anisotropy[0]) < 0.05
    assert raw.top_dims[2][0][0] == 5 and raw.top_dims[2][0][1] > 0.9
    assert raw.n_recurring_words == 5
    frame = raw.to_frame()
    np.testing.assert_allclose(
        frame["self_similarity_adjusted"], raw.self_similarity - raw.anisotropy
    )


def test_by_state_with_post_processing(fake_result):
    centered = by_state(fake_result, make_postprocessor("center"), n_pairs=3000, name="center")
    assert np.all(np.abs(centered.anisotropy) < 0.05)
    assert centered.postprocessing == "center"
    # per-state callable: clip dim 5 only where it is rogue
    clipped = by_state(
        fake_result, lambda s: make_postprocessor("clip", dims=[5] if s == 2 else []), n_pairs=3000
    )
    assert abs(clipped.anisotropy[2]) < 0.05
    np.testing.assert_allclose(
        clipped.anisotropy[:2], by_state(fake_result, n_pairs=3000).anisotropy[:2]
    )
    np.testing.assert_allclose(
        clipped_anisotropy_by_state(fake_result, [[], [], [5]], n_pairs=3000),
        clipped.anisotropy,
        atol=1e-12,
    )
    # whitening to 4 components: the widths shrink, IsoScore ~ 1 on the fitted sample
    white = by_state(
        fake_result, make_postprocessor("whiten", n_components=4), n_pairs=3000, similarity=False
    )
    assert white.contributions.shape == (3, 4)
    assert np.all(white.isoscore > 0.99)
    assert np.all(np.isnan(white.self_similarity))


# ----------------------------------------------------------------------------- figure builders


def test_figure_builders(fake_result):
    from isoscope.plots.anisotropy import (
        contribution_frame,
        cosine_contribution_figure,
        cosine_histogram_figure,
        histogram_frame,
        histogram_small_multiples,
        mean_shift_contrast_figure,
        metrics_by_layer_figure,
        metrics_frame,
    )

    raw = by_state(fake_result, n_pairs=3000, bins=20, name="raw")
    centered = by_state(
        fake_result, make_postprocessor("center"), n_pairs=3000, bins=20, similarity=False
    )
    series = {"raw": raw, "processed": centered}
    hist = cosine_histogram_figure(series, 2)
    assert [t.name.split(" (")[0] for t in hist.data] == ["raw", "processed"]
    assert sum(hist.data[0].y) == pytest.approx(1.0)
    assert f"(mean {raw.anisotropy[2]:.3f})" in hist.data[0].name
    assert len(histogram_small_multiples(series).data) == 2 * 3
    frame = histogram_frame(series)
    assert (
        len(frame) == 2 * 3 * 20
        and frame.groupby(["series", "state"])["share"].sum().round(9).eq(1).all()
    )
    lines = metrics_by_layer_figure(series)
    assert len(lines.data) == 2 * 4
    assert list(metrics_frame(series)["series"].unique()) == ["raw", "processed"]
    # stacked contributions: top dims + "all other dims" add up to the anisotropy of each state
    contrib = cosine_contribution_figure(raw, k=2)
    bars = [t for t in contrib.data if t.type == "bar"]
    np.testing.assert_allclose(
        np.sum([np.asarray(t.y, dtype=float) for t in bars], axis=0), raw.anisotropy, atol=1e-12
    )
    assert "dim 5" in {t.name for t in bars}  # the planted rogue dim of state "2"
    top = contribution_frame(raw, k=2)
    assert top[top["state"] == "2"].iloc[0]["dim"] == 5
    contrast = mean_shift_contrast_figure(raw, centered)
    assert len(contrast.data) == 4


# ----------------------------------------------------------------------------- anisotropy
# (Ethayarajh 2019): ~0 for an isotropic cloud, near 1 for a shifted one; pairs are different-text
# and seeded. Formerly tests/unit/test_anisotropy.py (backend/anisotropy.py merged into isotropy).


def test_isotropic_gaussian_is_near_zero():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 128))
    text_id = np.arange(3000) // 10
    value = anisotropy(x, text_id, n_pairs=10_000, seed=0)
    assert abs(value) < 0.01  # std of one cosine is 1/sqrt(128); mean of 1e4 pairs ~ 0.001


def test_shifted_cloud_is_near_one():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 128)) + 20.0  # common offset far larger than the spread
    text_id = np.arange(3000) // 10
    assert anisotropy(x, text_id, n_pairs=10_000, seed=0) > 0.99
    # One dominant rogue dimension is enough (Timkey & van Schijndel 2021).
    y = rng.normal(size=(3000, 128))
    y[:, 3] += 30.0
    assert anisotropy(y, text_id) > 0.8


def test_pairs_are_from_different_texts_and_seeded():
    rng = np.random.default_rng(0)
    text_id = rng.integers(0, 7, size=500)
    pairs = different_text_pairs(text_id, n_pairs=2000, seed=3)
    assert pairs.shape == (2000, 2)
    assert np.all(text_id[pairs[:, 0]] != text_id[pairs[:, 1]])
    np.testing.assert_array_equal(pairs, different_text_pairs(text_id, n_pairs=2000, seed=3))
    assert not np.array_equal(pairs, different_text_pairs(text_id, n_pairs=2000, seed=4))


def test_few_tokens_use_all_pairs_and_one_text_gives_none():
    text_id = np.array([0, 0, 1, 2])
    pairs = different_text_pairs(text_id, n_pairs=100)
    assert sorted(map(tuple, pairs.tolist())) == [(0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert len(different_text_pairs(np.zeros(10, dtype=int))) == 0
    assert np.isnan(anisotropy(np.ones((10, 3)), np.zeros(10, dtype=int)))


def test_pair_cosines_match_definition_and_zero_vectors():
    x = np.array([[1.0, 0], [0, 2], [3, 3], [0, 0]])
    pairs = np.array([[0, 1], [0, 2], [2, 3]])
    np.testing.assert_allclose(pair_cosines(x, pairs), [0.0, 1 / np.sqrt(2), 0.0])


def test_one_cosine_for_every_shape_and_empty_pairs():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 4, 8))
    b[0, 0] = 0.0
    with np.errstate(invalid="ignore"):  # 0 / 0 at the zero vector, set to 0 below
        expected = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    expected[0, 0] = 0.0
    np.testing.assert_allclose(cosine_rows(a, b), expected)
    np.testing.assert_allclose(cosine_rows(a[1], b[1]), expected[1])
    assert np.isnan(mean_pair_cosine(a[0], np.zeros((0, 2), dtype=np.int64)))
    pairs = np.array([[0, 1], [2, 3]])
    assert mean_pair_cosine(a[0], pairs) == pytest.approx(pair_cosines(a[0], pairs).mean())
