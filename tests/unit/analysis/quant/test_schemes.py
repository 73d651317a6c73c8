"""The quantizers and per-site errors on planted channels: the formulas' predictions hold, keep-K
with the planted channel removes the error, and the rotation and SmoothQuant transforms are exact
in full precision."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import kurtosis as scipy_kurtosis

from isoscope.analysis.quant.readiness import (
    SiteAccumulator,
    sample_positions,
    spearman,
    weighted_median,
)
from isoscope.analysis.quant.schemes import (
    SCHEMES,
    hadamard,
    hadamard_block,
    quant_groups,
    quant_per_row,
    quant_per_tensor,
    relative_error,
    rotate,
    site_errors,
    smooth_scales,
    transforms,
)

D, N, C, CHANNEL = 64, 4096, 100.0, 3


def _planted(seed: int = 0) -> torch.Tensor:
    """Gaussian tokens (N, D) whose channel 3 is ±C on every token (a Rademacher sign)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    sign = torch.randint(0, 2, (N,), generator=g).double() * 2 - 1
    x[:, CHANNEL] = C * sign
    return x


def test_kurtosis_of_a_planted_channel_matches_the_mixture_formula():
    x = _planted()
    acc = SiteAccumulator(D)
    for chunk in x.float().split(1000):  # streamed, as over batches
        acc.update(chunk, None)
    # pooled values: (D-1)/D standard normal (m4 = 3) and 1/D at ±C; mean ~ 0
    m2 = ((D - 1) + C**2) / D
    m4 = (3 * (D - 1) + C**4) / D
    assert acc.kurtosis() == pytest.approx(m4 / m2**2, rel=0.02)
    exact = scipy_kurtosis(x.numpy().ravel(), fisher=False)  # not excess
    assert acc.kurtosis() == pytest.approx(exact, rel=1e-6)
    assert float(acc.act_max[CHANNEL]) == pytest.approx(C)
    assert acc.n_ge / acc.n == pytest.approx(
        (1 + (D - 1) * 2 * (1 - 0.5 * (1 + math.erf(6 / math.sqrt(2))))) / D, abs=1e-4
    )


def test_gaussian_kurtosis_is_three():
    acc = SiteAccumulator(D)
    acc.update(torch.randn(N, D, generator=torch.Generator().manual_seed(1)), None)
    assert acc.kurtosis() == pytest.approx(3.0, abs=0.05)


def _uniform_noise_error(step: float, n_channels: int, signal_power: float) -> float:
    """Relative error of rounding ``n_channels`` values with ``step`` (uniform noise step²/12)."""
    return math.sqrt(n_channels * step**2 / 12 / signal_power)


def test_per_token_and_static_errors_follow_the_rounding_formula():
    x = _planted()
    w = torch.eye(D, dtype=torch.float64)  # per-channel int8 of the identity is exact
    act_max = x.abs().amax(0)
    errors = site_errors(x, w, act_max)
    step = C / 127  # every token's max is the planted ±C, and so is the corpus max
    predicted = _uniform_noise_error(step, D - 1, (D - 1) + C**2)
    assert errors["per_token"] == pytest.approx(predicted, rel=0.1)
    assert errors["per_tensor"] == pytest.approx(predicted, rel=0.1)
    assert errors["w4_g128"] == pytest.approx(0.0, abs=1e-12)  # W only, and W is exact


def test_keep_k_with_the_planted_channel_has_near_zero_error():
    x = _planted()
    w = torch.eye(D, dtype=torch.float64)
    act_max = x.abs().amax(0)
    errors = site_errors(x, w, act_max, keep=1)
    assert errors["keep_k"] < 1e-3
    assert errors["keep_k"] < errors["per_token"] / 20
    kept_other = site_errors(x, w, act_max.flip(0), keep=1)  # keeps the wrong channel
    assert kept_other["keep_k"] == pytest.approx(errors["per_token"], rel=0.05)


def test_rotation_is_exact_in_full_precision_and_spreads_the_outlier():
    x = _planted()
    g = torch.Generator().manual_seed(2)
    w = torch.randn(48, D, generator=g, dtype=torch.float64)
    assert torch.allclose(rotate(x) @ rotate(w).T, x @ w.T, atol=1e-9)
    h = hadamard(64, torch.float64)
    assert torch.allclose(h @ h.T, torch.eye(64, dtype=torch.float64), atol=1e-12)
    assert hadamard_block(576) == 64 and hadamard_block(1536) == 512 and hadamard_block(96) == 32
    assert float(rotate(x).abs().max()) < C / 4  # the planted channel is spread out
    errors = site_errors(x, w, x.abs().amax(0))
    assert errors["rotation"] < errors["per_token"] / 3


def test_smoothquant_transform_is_exact_in_full_precision():
    x = _planted()
    g = torch.Generator().manual_seed(3)
    w = torch.randn(48, D, generator=g, dtype=torch.float64)
    for alpha in (0.0, 0.5, 0.8, 1.0):
        s = smooth_scales(x.abs().amax(0), w, alpha)
        assert torch.allclose((x / s) @ (w * s).T, x @ w.T, atol=1e-9)
    s = smooth_scales(x.abs().amax(0), w, 0.5)
    expected = x.abs().amax(0).sqrt() / w.abs().amax(0).sqrt()
    assert torch.allclose(s, expected)
    errors = site_errors(x, w, x.abs().amax(0))
    assert errors["smoothquant"] < errors["per_token"]


def test_quantizers_are_symmetric_absmax():
    v = torch.tensor([[-2.0, -1.0, 0.3, 2.0], [0.0, 0.0, 0.0, 0.0]])
    q = quant_per_row(v)
    assert q[0, 0] == -2.0 and q[0, 3] == 2.0 and torch.all(q[1] == 0)
    assert float((q[0, 2] / (2.0 / 127)).round()) == round(0.3 / (2.0 / 127))
    clipped = quant_per_tensor(torch.tensor([5.0, -5.0, 0.5]), 1.0)
    assert clipped.tolist() == pytest.approx([1.0, -1.0, round(0.5 * 127) / 127])
    w = torch.randn(4, 300, generator=torch.Generator().manual_seed(4))
    q4 = quant_groups(w)
    for start in (0, 128, 256):
        group = q4[:, start : start + 128]
        for row in group:
            assert len(torch.unique(row)) <= 15  # int4 symmetric: -7 .. 7


def test_every_scheme_runs_and_unknown_is_refused():
    x, w = _planted().float(), torch.randn(8, D)
    errors = site_errors(x, w, x.abs().amax(0))
    assert set(errors) == set(SCHEMES)
    assert all(np.isfinite(v) and v >= 0 for v in errors.values())
    with pytest.raises(ValueError, match="unknown scheme"):
        transforms("fp4", w, x.abs().amax(0))
    assert relative_error(torch.zeros(3), torch.zeros(3)) == 0.0


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_stratified_sample_keeps_every_first_position_and_weights_sum_to_the_corpus():
    lengths = np.array([128] * 64)
    positions, w_first, w_rest = sample_positions(lengths, 256, seed=0)
    assert all(p[0] == 0 for p in positions)  # 64 first positions, 192 others
    assert sum(len(p) for p in positions) == 256
    n_first = sum(int((p == 0).sum()) for p in positions)
    n_rest = sum(int((p > 0).sum()) for p in positions)
    assert n_first * w_first + n_rest * w_rest == pytest.approx(lengths.sum())
    assert all(len(np.unique(p)) == len(p) and p.max() < 128 for p in positions)
    few, w_f, w_r = sample_positions(np.array([3, 0, 2]), 100, seed=0)  # all 5 tokens
    assert [list(p) for p in few] == [[0, 1, 2], [], [0, 1]] and w_f == w_r == 1.0


def test_weighted_relative_error_and_median():
    y = torch.tensor([[1.0, 0.0], [0.0, 10.0]])
    y_q = torch.tensor([[1.0, 1.0], [0.0, 10.0]])  # error only on row 0
    assert relative_error(y_q, y) == pytest.approx(1 / math.sqrt(101))
    weights = torch.tensor([100.0, 1.0])  # row 0 stands for 100 tokens
    assert relative_error(y_q, y, weights) == pytest.approx(math.sqrt(100 / 200))
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert weighted_median(values, torch.ones(4)) == 2.0
    assert weighted_median(values, torch.tensor([1.0, 1.0, 1.0, 10.0])) == 4.0


def test_bootstrap_intervals_hold_the_value_and_narrow_with_more_texts():
    from isoscope.analysis.quant.readiness import bootstrap_intervals

    rng = np.random.default_rng(1)
    few = rng.exponential(1.0, 8)
    many = rng.exponential(1.0, 512)
    got = bootstrap_intervals(
        {"few": (few * 10, np.full(8, 10.0)), "many": (many * 10, np.full(512, 10.0))}
    )
    (lo_f, hi_f), (lo_m, hi_m) = got["few"], got["many"]
    assert lo_f <= few.mean() <= hi_f and lo_m <= many.mean() <= hi_m
    assert hi_m - lo_m < (hi_f - lo_f) / 2  # expected about sqrt(512 / 8) = 8 times narrower
    one = bootstrap_intervals({"one": (np.array([3.0]), np.array([2.0]))})["one"]
    assert one == [1.5, 1.5]  # one text: nothing to resample


def test_keep_k_on_a_site_no_wider_than_k_keeps_every_channel():
    from isoscope.analysis.quant.schemes import quant_per_row, transforms

    assert quant_per_row(torch.zeros(3, 0)).shape == (3, 0)
    w = torch.randn(5, 4)
    x_fn, w_q = transforms("keep_k", w, torch.ones(4), keep=8)
    x = torch.randn(2, 4)
    torch.testing.assert_close(w_q, w)
    torch.testing.assert_close(x_fn(x), x)
