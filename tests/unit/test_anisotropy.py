"""Anisotropy (Ethayarajh 2019): ~0 for an isotropic cloud, near 1 for a shifted one; pairs are
different-text and seeded."""

from __future__ import annotations

import numpy as np

from backend.anisotropy import anisotropy, different_text_pairs, pair_cosines


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
