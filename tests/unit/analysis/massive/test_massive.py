"""Massive activations (Sun et al. 2024) on synthetic hidden states with planted huge values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.massive import MassiveAccumulator, _median_from_histogram

S, N, D = 3, 60, 16


def _vocab(ids: list[int]) -> list[str]:
    names = {0: "The", 1: ".", 2: "Ċ", 3: "Ġcat"}
    return [names.get(i, f"tok{i}") for i in ids]


def _planted(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Three texts of 20 tokens; state 2 has 5000 at (text 1, position 0, dim 7) and 3000 at
    (text 2, position 5, a '.'); state 1 has 150 (above 100, far below 1000 x median)."""
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(S, N, D, generator=gen)
    text = np.repeat(np.arange(3), 20)
    position = np.tile(np.arange(20), 3)
    token = np.full(N, 3)
    token[position == 0] = 0
    token[45] = 1  # text 2, position 5: a delimiter
    meta = torch.from_numpy(np.column_stack([text, position, token]).astype(np.int64))
    hidden[2, 20, 7] = 5000.0  # text 1, position 0
    hidden[2, 45, 3] = -3000.0  # text 2, position 5, '.'
    hidden[1, 10, 2] = 150.0
    return hidden, meta


def _finish(acc: MassiveAccumulator):
    return acc.finish(["emb", "1", "2"], _vocab)


def test_planted_massive_activations_are_found_with_their_carriers():
    hidden, meta = _planted()
    acc = MassiveAccumulator(S, torch.device("cpu"))
    acc.update(hidden, meta)
    stats = _finish(acc)
    assert stats.top_value[2, 0] == pytest.approx(5000.0)
    assert (stats.top_dim[2, 0], stats.top_text[2, 0], stats.top_position[2, 0]) == (7, 1, 0)
    assert stats.top_token[2, 0] == "The"
    assert stats.top_value[2, 1] == pytest.approx(3000.0)  # |h|: the sign does not matter
    assert (stats.top_dim[2, 1], stats.top_position[2, 1], stats.top_token[2, 1]) == (3, 5, ".")
    assert list(stats.n_above_100) == [0, 1, 2]
    assert list(stats.n_massive) == [0, 0, 2]  # 150 is > 100 but not > 1000 x median
    assert stats.carriers[2]["first"] == 1 and stats.carriers[2]["delimiter"] == 1
    assert stats.carriers[2]["other"] == 0
    assert {d for d, _ in stats.carriers[2]["dims"]} == {3, 7}
    assert stats.massive_exact
    layers = stats.layers()
    assert layers[2]["top"][0] == {"value": 5000.0, "dim": 7, "position": 0, "token": "The"}
    assert layers[2]["n_massive"] == 2 and layers[0]["name"] == "emb"


def test_median_from_the_histogram_is_within_one_bin_of_the_exact_median():
    hidden, meta = _planted()
    acc = MassiveAccumulator(S, torch.device("cpu"))
    acc.update(hidden, meta)
    stats = _finish(acc)
    exact = np.median(np.abs(hidden.numpy()).reshape(S, -1), axis=1)
    np.testing.assert_allclose(stats.median_abs, exact, rtol=0.012)


def test_streaming_over_batches_equals_one_batch():
    hidden, meta = _planted()
    whole = MassiveAccumulator(S, torch.device("cpu"))
    whole.update(hidden, meta)
    parts = MassiveAccumulator(S, torch.device("cpu"))
    for rows in (slice(0, 7), slice(7, 33), slice(33, N)):
        parts.update(hidden[:, rows], meta[rows])
    a, b = _finish(whole), _finish(parts)
    np.testing.assert_array_equal(a.top_value, b.top_value)
    np.testing.assert_array_equal(a.top_dim, b.top_dim)
    np.testing.assert_array_equal(a.top_position, b.top_position)
    np.testing.assert_array_equal(a.median_abs, b.median_abs)
    np.testing.assert_array_equal(a.n_massive, b.n_massive)
    assert a.n_tokens == b.n_tokens == N


def test_median_of_a_known_histogram():
    from isoscope.analysis.massive.massive import BINS_PER_DECADE, LOG_LO, N_BINS

    hist = np.zeros((1, N_BINS), dtype=np.int64)
    one = int((0.0 - LOG_LO) * BINS_PER_DECADE)  # the bin starting at |h| = 1
    hist[0, one] = 10
    assert _median_from_histogram(hist)[0] == pytest.approx(10 ** (0.5 / BINS_PER_DECADE))


def test_overflow_falls_back_to_the_histogram(monkeypatch):
    import isoscope.analysis.massive.massive as massive

    monkeypatch.setattr(massive, "MAX_CANDIDATES", 1)
    hidden, meta = _planted()
    acc = MassiveAccumulator(S, torch.device("cpu"))
    acc.update(hidden, meta)
    stats = _finish(acc)
    assert not stats.massive_exact
    assert list(stats.n_massive) == [0, 0, 2]
    assert stats.top_value[2, 0] == pytest.approx(5000.0)


def test_the_top_k_are_distinct_dim_position_sites():
    """Every text's first token carries the same value at the same dim (a causal model's <bos>):
    it is listed once, and the next entries are other sites."""
    hidden, meta = _planted()
    hidden[2, [0, 20, 40], 7] = 5000.0  # position 0 of all three texts
    acc = MassiveAccumulator(S, torch.device("cpu"))
    acc.update(hidden, meta)
    stats = _finish(acc)
    sites = {(int(stats.top_dim[2, k]), int(stats.top_position[2, k])) for k in range(3)}
    assert len(sites) == 3 and (7, 0) in sites
    assert stats.top_value[2, 0] == pytest.approx(5000.0) and stats.top_text[2, 0] == 0
    assert stats.top_value[2, 1] == pytest.approx(3000.0)


def test_a_second_pass_makes_the_median_and_the_massive_count_exact():
    """Values spread so that the histogram median is off by up to a bin: after refine() the median
    equals numpy's and the count above max(100, 1000 x median) is the exact one."""
    gen = torch.Generator().manual_seed(3)
    hidden = torch.rand(S, N, D, generator=gen) * 0.2 + 0.1  # median ~0.2: threshold ~200
    hidden[:, :5, 0] = torch.linspace(150, 260, 5)  # straddle the threshold
    meta = _planted()[1]
    acc = MassiveAccumulator(S, torch.device("cpu"))
    for half in (slice(0, 30), slice(30, 60)):
        acc.update(hidden[:, half], meta[half])
    acc.begin_refine()
    for half in (slice(0, 30), slice(30, 60)):
        acc.refine(hidden[:, half])
    stats = _finish(acc)
    values = hidden.abs().numpy().reshape(S, -1).astype(np.float64)
    exact = np.median(values, axis=1)
    np.testing.assert_allclose(stats.median_abs, exact, rtol=1e-7)
    assert stats.median_exact and stats.massive_exact
    want = (values > np.maximum(100, 1000 * exact)[:, None]).sum(axis=1)
    assert list(stats.n_massive) == list(want)


def test_peak_state_is_the_state_of_the_largest_value():
    from isoscope.analysis.massive.massive import peak_state

    hidden, meta = _planted()
    acc = MassiveAccumulator(S, torch.device("cpu"))
    acc.update(hidden, meta)
    stats = _finish(acc)
    assert peak_state(stats) == 2


def test_carriers_can_be_named_by_the_caller():
    """The accumulator is not decoder-specific: an image model names its carriers by token kind."""
    hidden, meta = _planted()
    acc = MassiveAccumulator(S, torch.device("cpu"))
    acc.update(hidden, meta)
    stats = acc.finish(
        ["emb", "1", "2"],
        _vocab,
        carrier_of=lambda position, token: "prefix" if position == 0 else "patch",
        kinds=("prefix", "patch"),
    )
    assert stats.carriers[2]["prefix"] == 1 and stats.carriers[2]["patch"] == 1
    assert "first" not in stats.carriers[0] and stats.carriers[0]["prefix"] == 0
