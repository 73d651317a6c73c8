"""Sentence-similarity and word-sense scoring on planted examples: Spearman vs scipy and by hand,
CSV readers and their errors, word spans, threshold sweeps, per-state tables."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from isoscope.analysis.similarity import (
    WordSenseVectors,
    clip_dims_by_state,
    cosine_rows,
    find_word_span,
    loo_accuracy,
    parse_clip,
    spearman100,
    sts_by_state,
    threshold_sweep,
    token_span,
    top_mean_dims,
    word_sense_by_state,
)
from isoscope.engine.errors import InputError

# ----------------------------------------------------------------------------- Spearman


def test_spearman_matches_scipy_and_a_hand_computation():
    pred = np.array([0.1, 0.4, 0.35, 0.8, 0.9])
    gold = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # ranks of pred: 1, 3, 2, 4, 5 -> d = 0, 1, -1, 0, 0; rho = 1 - 6 * 2 / (5 * 24) = 0.9
    assert spearman100(pred, gold) == pytest.approx(90.0)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=200), rng.normal(size=200)
    b[::3] = a[::3]
    assert spearman100(a, b) == pytest.approx(100 * spearmanr(a, b).statistic)
    ties = np.array([1.0, 1.0, 2.0, 3.0, 3.0, 4.0])
    assert spearman100(ties, gold[[0, 1, 2, 3, 4, 4]]) == pytest.approx(
        100 * spearmanr(ties, gold[[0, 1, 2, 3, 4, 4]]).statistic
    )
    assert np.isnan(spearman100(np.ones(5), gold))


def test_cosine_rows_and_zero_vectors():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0], [1.0, 0.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [0.0, 1.0, 0.0])


def test_sts_by_state_clipping_recovers_a_planted_signal():
    """Dim 0 holds a large offset with large independent noise that hides the real similarity;
    clipping it restores the ranking."""
    rng = np.random.default_rng(1)
    n, d = 80, 16
    gold = rng.uniform(0, 5, size=n)
    base = rng.normal(size=(n, d))
    noise = rng.normal(size=(n, d))
    mix = (gold / 5.0)[:, None]
    first = base.copy()
    second = mix * base + (1 - mix) * noise
    first[:, 0] = 50.0 + 40.0 * rng.normal(size=n)
    second[:, 0] = 50.0 + 40.0 * rng.normal(size=n)
    pooled1, pooled2 = first[None], second[None]  # one hidden state
    dims = clip_dims_by_state("largest-mean", pooled1, pooled2)
    assert (
        dims[0][0] == 0 and len(dims[0]) == 2
    )  # the rogue dim first, then the next largest |mean|
    (row,) = sts_by_state(pooled1, pooled2, gold, dims, "standardize", state_names=["emb"])
    assert row["raw"] < 40 and row["clipped"] > 80 and row["processed"] > row["raw"] + 20
    keep = np.setdiff1d(np.arange(d), dims[0])
    assert row["clipped"] == pytest.approx(
        spearman100(cosine_rows(first[:, keep], second[:, keep]), gold)
    )
    assert set(row) == {"index", "name", "raw", "clipped", "clipped_dims", "processed"}


def test_clip_modes():
    pooled = np.zeros((2, 4, 5))
    pooled[0, :, 3] = 9.0
    pooled[0, :, 1] = -5.0
    pooled[1, :, 4] = 2.0
    assert clip_dims_by_state("largest-mean", pooled, pooled) == [[3, 1], [4, 0]]
    assert clip_dims_by_state("none", pooled, pooled) == [[], []]
    assert clip_dims_by_state([2, 2, 0], pooled, pooled) == [[0, 2], [0, 2]]
    assert top_mean_dims(pooled[0], 1) == [3]
    assert parse_clip("AUTO") == "auto" and parse_clip("223, 338") == [223, 338]
    assert parse_clip("Largest-Mean") == "largest-mean"
    with pytest.raises(InputError, match="outlier dims"):
        clip_dims_by_state("auto", pooled, pooled)  # auto needs the extraction it is detected on
    with pytest.raises(InputError):
        parse_clip("x1")
    with pytest.raises(InputError):
        parse_clip("500", hidden_size=384)


# ----------------------------------------------------------------------------- word spans


def test_find_word_span_whole_words_case_and_inflections():
    assert find_word_span("The Bank closed.", "bank") == (4, 8)
    assert find_word_span("Embankment by the bank", "bank") == (18, 22)  # whole word preferred
    assert find_word_span("Two banks merged.", "bank") == (4, 9)  # inflection
    assert find_word_span("He brings a ring.", "ring") == (12, 16)
    assert find_word_span("Nothing here.", "bank") is None
    assert find_word_span("embankment", "bank") is None


def test_token_span_picks_overlapping_non_special_pieces():
    # "[CLS] em ##bank bank ##s [SEP]" with char offsets
    offsets = [(0, 0), (0, 2), (2, 6), (7, 11), (11, 12), (0, 0)]
    special = [True, False, False, False, False, True]
    assert token_span(offsets, special, (7, 12)) == [3, 4]
    assert token_span(offsets, special, (20, 25)) == []


# ----------------------------------------------------------------------------- thresholds


def test_threshold_sweep_on_a_planted_example():
    cos = np.array([0.9, 0.8, 0.75, 0.4, 0.3, 0.6])
    same = np.array([True, True, True, False, False, False])
    sweep = threshold_sweep(cos, same)
    assert sweep.best_accuracy == pytest.approx(1.0)
    assert 0.6 < sweep.best_threshold < 0.75
    assert sweep.accuracy[0] == pytest.approx(0.5)  # below everything: all predicted "same"
    assert sweep.accuracy[-1] == pytest.approx(0.5)  # above everything: all "different"
    assert len(sweep.thresholds) == len(np.unique(cos)) + 1
    noisy = np.array([0.9, 0.5, 0.7, 0.6])
    s = threshold_sweep(noisy, np.array([True, True, False, False]))
    assert s.best_accuracy == pytest.approx(0.75)
    # leave-one-out by hand: only 0.6 fails (without it the cut falls at (0.4 + 0.75) / 2 = 0.575 < 0.6)
    assert loo_accuracy(cos, same) == pytest.approx(5 / 6)
    assert loo_accuracy(np.array([0.1, 0.2, 0.3, 0.4]), np.array([True, False, True, False])) < 0.5


def test_word_sense_by_state_raw_vs_clipped():
    """A shared rogue dim makes every pair look alike; clipping it separates the senses."""
    rng = np.random.default_rng(3)
    m, d = 40, 12
    same = np.arange(m) % 2 == 0
    a = rng.normal(size=(m, d))
    b = np.where(same[:, None], a + 0.3 * rng.normal(size=(m, d)), rng.normal(size=(m, d)))
    a[:, 0] = b[:, 0] = 100.0
    vectors = WordSenseVectors(a[None], b[None], same, np.arange(m), ())
    (row,) = word_sense_by_state(vectors, [[0]], state_names=["emb"])
    assert row["clipped_accuracy"] == pytest.approx(1.0)
    assert row["clipped_loo_accuracy"] > 0.9
    assert row["raw_accuracy"] >= 0.5 and row["raw_threshold"] > 0.99


def test_figures_keep_the_embedding_state_on_a_category_axis():
    from isoscope.plots.similarity import sts_figure, sweep_figure, word_sense_figure

    rows = [
        {
            "index": s,
            "name": n,
            "raw": 50.0 + s,
            "clipped": 51.0 + s,
            "clipped_dims": [1],
            "processed": float("nan"),
        }
        for s, n in enumerate(["emb", "1", "2"])
    ]
    fig = sts_figure(rows, "standardisation")
    assert fig.layout.xaxis.type == "category"  # "1", "2" look numeric: plotly would drop "emb"
    assert [tr.name for tr in fig.data] == ["raw", "clipped", "standardisation"]
    assert list(fig.data[0].x) == ["emb", "1", "2"] and fig.data[2].y == (None, None, None)
    wic_rows = [{"name": n, "raw_accuracy": 0.6, "raw_loo_accuracy": 0.5} for n in ["emb", "1"]]
    wfig = word_sense_figure(wic_rows)
    assert wfig.layout.xaxis.type == "category" and len(wfig.data) == 2
    sweep = threshold_sweep(np.array([0.2, 0.8]), np.array([False, True]))
    sfig = sweep_figure({"raw": sweep}, "emb")
    assert sfig.data[1].x[0] == pytest.approx(sweep.best_threshold)


def test_clip_auto_is_the_headline_outlier_dims_everywhere():
    """One meaning of clip "auto": the Similarity clip, the export clip and the report all zero each
    state's headline outlier dims (z-score or extreme-index), as the Outlier page shows them."""
    from isoscope.analysis.outliers import auto_clip_dims, outlier_dims_by_state
    from isoscope.engine.extraction import TokenTable
    from isoscope.share.export import resolve_clip
    from tests.synthetic import result_from_vectors

    rng = np.random.default_rng(0)
    n = 400
    vectors = rng.normal(size=(2, n, 16))
    vectors[1, :, 7] += 30.0  # a rogue dim at state 1 only
    tokens = TokenTable(
        text_id=(np.arange(n) // 10).astype(np.int32),
        position=np.tile(np.arange(10, dtype=np.int32), n // 10),
        token=np.array([f"t{i}" for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.zeros(n, dtype=bool),
        is_punct=np.zeros(n, dtype=bool),
    )
    result = result_from_vectors(vectors, tokens)
    expected = outlier_dims_by_state(result)
    assert expected[1] == [7] and auto_clip_dims(result) == expected
    pooled = np.zeros((2, 3, 16))
    assert clip_dims_by_state("auto", pooled, pooled, result=result) == expected
    assert [resolve_clip("auto", result, s) for s in range(2)] == [sorted(d) for d in expected]
